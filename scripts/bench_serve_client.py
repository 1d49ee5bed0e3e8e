#!/usr/bin/env python3
"""Load generator for scripts/bench-serve: C concurrent streaming clients against a running `ferry serve`, each
sending R completion requests back to back (different prompts, max_tokens N, greedy). Prints one JSON line:
clients, requests, completion tokens, wall seconds, aggregate tokens/s, time to first token p50/p99 (seconds,
from sending the request to the first non-empty text chunk)."""
import argparse
import json
import statistics
import threading
import time

import openai


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--clients", type=int, default=1)
    p.add_argument("--requests", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=32)
    args = p.parse_args()
    client = openai.OpenAI(base_url=args.url, api_key="none", max_retries=0, timeout=3600)
    ttft, tokens, errors = [], [0], []
    lock = threading.Lock()

    def one(c):
        for r in range(args.requests):
            prompt = f"Request {r} of client {c}: tell me a long story about the number {c * 7 + r}."
            t0 = time.perf_counter()
            first = None
            try:
                stream = client.completions.create(model=args.model, prompt=prompt, max_tokens=args.max_tokens,
                                                   temperature=0, stream=True, stream_options={"include_usage": True})
                n = 0
                for chunk in stream:
                    if chunk.choices and chunk.choices[0].text and first is None:
                        first = time.perf_counter() - t0
                    if chunk.usage is not None:
                        n = chunk.usage.completion_tokens
            except Exception as e:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(repr(e))
                continue
            with lock:
                tokens[0] += n
                if first is not None:
                    ttft.append(first)

    threads = [threading.Thread(target=one, args=(c,)) for c in range(args.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttft.sort()
    q = lambda f: ttft[min(len(ttft) - 1, int(f * len(ttft)))] if ttft else None  # noqa: E731
    print(json.dumps({"clients": args.clients, "requests": args.clients * args.requests, "tokens": tokens[0],
                      "wall_s": wall, "tokens_per_s": tokens[0] / wall, "ttft_p50_s": statistics.median(ttft) if ttft else None,
                      "ttft_p99_s": q(0.99), "errors": errors[:3]}))


if __name__ == "__main__":
    main()
