#!/usr/bin/env python3
"""Talks to a running `ferry serve` through the official OpenAI Python client (and raw HTTP where the client
would refuse to send something malformed). Each subcommand is one test; it exits non-zero with the reason on the
first failed check. serve_openai_test.cc starts the servers and runs these.

  openai_client.py basic       --url U --key K --model M --ferry BIN --folder DIR
  openai_client.py concurrency --url U --key K --model M --pid PID [--clients 32]
  openai_client.py faults      --url U --key K --model M
  openai_client.py overflow    --url U --key K --model M
  openai_client.py timeout     --url U --key K --model M
  openai_client.py shutdown    --url U --key K --model M --pid PID
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import httpx2 as httpx  # this package index names httpx "httpx2" (the openai client imports it so)
import openai

FAILED = []


def check(cond, what):
    if not cond:
        FAILED.append(what)
        print("FAIL:", what, file=sys.stderr, flush=True)


def metrics(url):
    text = httpx.get(url.replace("/v1", "") + "/metrics", timeout=30).text
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def wait_idle(url, timeout=30.0):
    """Polls /metrics until no sequence runs or waits and no KV cache is held; returns the last metrics."""
    end = time.time() + timeout
    m = metrics(url)
    while time.time() < end:
        m = metrics(url)
        if m["ferry_running_sequences"] == 0 and m["ferry_queue_length"] == 0 and m["ferry_kv_cache_bytes"] == 0:
            return m
        time.sleep(0.05)
    return m


def stream_text(stream, kind):
    """Concatenates a stream's pieces; checks the chunk shapes. Returns (text, finish_reason, usage, n_chunks)."""
    text, finish, usage, n = "", None, None, 0
    for chunk in stream:
        n += 1
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            check(c.index == 0, "choice index 0")
            piece = c.delta.content if kind == "chat" else c.text
            if piece:
                text += piece
            if c.finish_reason is not None:
                check(finish is None, "one finish_reason per stream")
                finish = c.finish_reason
    return text, finish, usage, n


def ferry_generate(args, extra):
    out = subprocess.run([args.ferry, "generate", "-m", args.folder, "--json", "--temp", "0"] + extra,
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit("ferry generate failed: " + out.stderr)
    return json.loads(out.stdout)


def cmd_basic(args, client):
    models = client.models.list()
    check([m.id for m in models.data] == [args.model], f"models.list: {[m.id for m in models.data]}")
    check(client.models.retrieve(args.model).id == args.model, "models.retrieve")
    health = httpx.get(args.url.replace("/v1", "") + "/health", timeout=30).json()
    check(health["status"] == "ok", f"health {health}")

    # Completions: the streamed text equals the whole text, and equals `ferry generate` with the same settings.
    prompt = "The quick brown fox"
    whole = client.completions.create(model=args.model, prompt=prompt, max_tokens=20, temperature=0)
    check(whole.object == "text_completion", "completion object")
    check(whole.choices[0].finish_reason in ("stop", "length"), f"finish {whole.choices[0].finish_reason}")
    check(whole.usage.completion_tokens > 0 and whole.usage.prompt_tokens > 0, f"usage {whole.usage}")
    check(whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens, "total_tokens")
    streamed, finish, usage, n = stream_text(
        client.completions.create(model=args.model, prompt=prompt, max_tokens=20, temperature=0, stream=True,
                                  stream_options={"include_usage": True}), "completions")
    check(streamed == whole.choices[0].text, f"completion stream {streamed!r} != {whole.choices[0].text!r}")
    check(finish == whole.choices[0].finish_reason, "stream finish reason")
    check(usage is not None and usage.completion_tokens == whole.usage.completion_tokens, f"stream usage {usage}")
    check(n >= 3, f"the completion came in {n} chunks")
    ref = ferry_generate(args, ["-p", prompt, "-n", "20"])
    check(ref["text"] == whole.choices[0].text, f"ferry generate {ref['text']!r} != server {whole.choices[0].text!r}")
    check(len(ref["prompt_ids"]) == whole.usage.prompt_tokens, "prompt tokens as ferry generate counts them")

    # Token-id prompts.
    ids = ref["prompt_ids"]
    by_ids = client.completions.create(model=args.model, prompt=ids, max_tokens=20, temperature=0)
    check(by_ids.choices[0].text == whole.choices[0].text, "a token-id prompt gives the text prompt's completion")

    # Chat: the template applied; streamed == whole == `ferry generate --chat`.
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a colour."}]
    chat = client.chat.completions.create(model=args.model, messages=messages, max_tokens=24, temperature=0)
    check(chat.object == "chat.completion", "chat object")
    msg = chat.choices[0].message
    check(msg.role == "assistant", "assistant role")
    streamed, finish, _, _ = stream_text(
        client.chat.completions.create(model=args.model, messages=messages, max_tokens=24, temperature=0, stream=True),
        "chat")
    check(streamed == msg.content, f"chat stream {streamed!r} != {msg.content!r}")
    check(finish == chat.choices[0].finish_reason, "chat finish")
    ref = ferry_generate(args, ["--system", "You are terse.", "--chat", "Name a colour.", "-n", "24"])
    check(ref["text"] == msg.content, f"ferry generate --chat {ref['text']!r} != server {msg.content!r}")
    check(len(ref["prompt_ids"]) == chat.usage.prompt_tokens, "chat prompt tokens")

    # Stop strings, max_tokens and seeds.
    long = client.completions.create(model=args.model, prompt=prompt, max_tokens=40, temperature=0)
    text = long.choices[0].text
    if len(text) > 6:
        stop = text[3:6]
        cut = client.completions.create(model=args.model, prompt=prompt, max_tokens=40, temperature=0, stop=[stop])
        check(cut.choices[0].text == text[:text.index(stop)], f"stop {stop!r}: {cut.choices[0].text!r}")
        check(cut.choices[0].finish_reason == "stop", "stop string finish reason")
    short = client.completions.create(model=args.model, prompt=prompt, max_tokens=3, temperature=0)
    check(short.usage.completion_tokens == 3 and short.choices[0].finish_reason == "length", "max_tokens 3")
    a = client.completions.create(model=args.model, prompt=prompt, max_tokens=16, temperature=1.0, seed=5)
    b = client.completions.create(model=args.model, prompt=prompt, max_tokens=16, temperature=1.0, seed=5)
    c = client.completions.create(model=args.model, prompt=prompt, max_tokens=16, temperature=1.0, seed=6, top_p=0.9)
    check(a.choices[0].text == b.choices[0].text, "the same seed samples the same text")
    check(a.choices[0].text != whole.choices[0].text or c.choices[0].text != whole.choices[0].text,
          "sampling differs from greedy")

    # Logprobs: one entry per token, the chosen token's logprob <= 0 and among the top alternatives.
    lp = client.chat.completions.create(model=args.model, messages=messages, max_tokens=5, temperature=0,
                                        logprobs=True, top_logprobs=3)
    content = lp.choices[0].logprobs.content
    check(len(content) == lp.usage.completion_tokens, "a logprob per token")
    for t in content:
        check(t.logprob <= 0 and len(t.top_logprobs) == 3, "logprob entries")
        check(abs(t.top_logprobs[0].logprob - t.logprob) < 1e-4, "greedy picks the top token")
    lp2 = client.completions.create(model=args.model, prompt=prompt, max_tokens=4, temperature=0, logprobs=2)
    check(len(lp2.choices[0].logprobs.token_logprobs) == 4, "legacy logprobs")


def cmd_concurrency(args, client):
    """N streaming clients at once, different prompts and lengths: each equals its solo greedy result."""
    n = args.clients
    prompts = [f"Story number {i}: once upon a time" + " there was" * (i % 5) for i in range(n)]
    # Long enough that the clients overlap even where the tiny model decodes a token in well under a millisecond (a CI
    # run with 4-32 tokens saw 32 clients done in 0.23 s at a mean batch of 1.88).
    lengths = [24 + (i * 7) % 29 for i in range(n)]
    solo = [client.completions.create(model=args.model, prompt=prompts[i], max_tokens=lengths[i], temperature=0)
            .choices[0].text for i in range(n)]
    idle = wait_idle(args.url)
    before = idle
    rss = []

    def rss_kib():
        with open(f"/proc/{args.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    for round_ in range(2):
        results = [None] * n
        errors = []
        # Every client sends once all threads are up: started one by one on a busy machine (ctest -j2), early
        # clients could finish before late ones began (a CI run saw a mean batch of 1.99 where 8-21 is usual).
        start = threading.Barrier(n)

        def one(i):
            try:
                start.wait(timeout=60)
                if i % 2 == 0:
                    s = client.completions.create(model=args.model, prompt=prompts[i], max_tokens=lengths[i],
                                                  temperature=0, stream=True)
                    results[i] = stream_text(s, "completions")[0]
                else:  # chat-shaped clients share the batch with completion ones
                    s = client.completions.create(model=args.model, prompt=prompts[i], max_tokens=lengths[i],
                                                  temperature=0, stream=True, stream_options={"include_usage": True})
                    results[i] = stream_text(s, "completions")[0]
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"client {i}: {e!r} (cause: {e.__cause__!r})")

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        check(all(not t.is_alive() for t in threads), "every client finished within the time bound")
        check(not errors, f"errors: {errors[:3]}")
        for i in range(n):
            check(results[i] == solo[i], f"round {round_} client {i}: {results[i]!r} != solo {solo[i]!r}")
        m = wait_idle(args.url)
        check(m["ferry_running_sequences"] == 0 and m["ferry_kv_cache_bytes"] == 0, "idle after the clients")
        rss.append(rss_kib())
        print(f"round {round_}: {n} clients in {time.time() - t0:.2f} s, RSS {rss[-1] / 1024:.1f} MiB", flush=True)
    m = metrics(args.url)
    batched = (m["ferry_step_sequences_total"] - before["ferry_step_sequences_total"]) / max(
        m["ferry_steps_total"] - before["ferry_steps_total"], 1)
    print(f"mean batch {batched:.2f}", flush=True)
    check(batched > 2, f"requests were batched together (mean batch {batched:.2f})")
    # Memory returns to its idle level: a second round of the same load does not grow the process.
    # (Not under AddressSanitizer, whose quarantine holds freed memory on purpose; there LeakSanitizer checks the
    # server at its clean exit in the shutdown test instead.)
    if not args.sanitized:
        check(rss[1] <= rss[0] * 1.05 + 8 * 1024, f"RSS grew from {rss[0]} KiB to {rss[1]} KiB over a second round")
    check(idle["ferry_kv_cache_bytes"] == 0, "no KV cache held when idle")


def raw(args, path, body, headers=None, method="POST"):
    h = {"Authorization": f"Bearer {args.key}", "Content-Type": "application/json"}
    h.update(headers or {})
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.request(method, args.url + path, content=data, headers=h, timeout=60)


def cmd_faults(args, client):
    m0 = metrics(args.url)
    # Disconnect mid-stream: the sequence is cancelled and its KV cache freed.
    with httpx.Client(timeout=60) as h:
        with h.stream("POST", args.url + "/completions", headers={"Authorization": f"Bearer {args.key}"},
                      json={"model": args.model, "prompt": "Hello", "max_tokens": 1500, "temperature": 0,
                            "stream": True}) as r:
            check(r.status_code == 200, f"stream status {r.status_code}")
            check(r.headers["content-type"].startswith("text/event-stream"), "event-stream content type")
            events = 0
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events += 1
                if events >= 3:
                    break
    m = wait_idle(args.url)
    check(m["ferry_running_sequences"] == 0 and m["ferry_kv_cache_bytes"] == 0, f"disconnected stream freed: {m}")
    check(m['ferry_sequences_total{outcome="cancelled"}'] == m0['ferry_sequences_total{outcome="cancelled"}'] + 1,
          "the disconnected stream counts as cancelled")
    check(m["ferry_generated_tokens_total"] - m0["ferry_generated_tokens_total"] < 1500, "it stopped early")

    # Wrong key: 401 through the client, and raw.
    bad = openai.OpenAI(base_url=args.url, api_key="wrong", max_retries=0)
    try:
        bad.models.list()
        check(False, "a wrong key was accepted")
    except openai.AuthenticationError as e:
        check(e.status_code == 401, "401 for a wrong key")
    check(httpx.get(args.url + "/models", timeout=30).status_code == 401, "401 without a key")

    # Unknown model: 404 model_not_found.
    try:
        client.completions.create(model="no-such-model", prompt="x", max_tokens=2)
        check(False, "unknown model accepted")
    except openai.NotFoundError as e:
        check(e.body["code"] == "model_not_found", f"404 code {e.body}")

    # Context: a prompt longer than the context, and max_tokens beyond it.
    try:
        client.completions.create(model=args.model, prompt=[5] * 3000, max_tokens=2)
        check(False, "a prompt over the context was accepted")
    except openai.BadRequestError as e:
        check(e.body["code"] == "context_length_exceeded", f"long prompt: {e.body}")
    try:
        client.completions.create(model=args.model, prompt="hi", max_tokens=100000)
        check(False, "max_tokens beyond the context was accepted")
    except openai.BadRequestError as e:
        check(e.body["code"] == "context_length_exceeded" and e.body["param"] == "max_tokens", f"{e.body}")

    # Malformed bodies: every one a 400 with an OpenAI error object, the server still serving.
    M = args.model
    table = [
        ("/chat/completions", b"{not json"),
        ("/chat/completions", b""),
        ("/chat/completions", b"[]"),
        ("/chat/completions", {"messages": [{"role": "user", "content": "x"}]}),
        ("/chat/completions", {"model": M}),
        ("/chat/completions", {"model": M, "messages": []}),
        ("/chat/completions", {"model": M, "messages": [{"role": "user"}]}),
        ("/chat/completions", {"model": M, "messages": [{"role": "robot", "content": "x"}]}),
        ("/chat/completions", {"model": M, "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}),
        ("/chat/completions", {"model": M, "messages": [{"role": "user", "content": "x"}], "temperature": "a"}),
        ("/chat/completions", {"model": M, "messages": [{"role": "user", "content": "x"}], "n": 3}),
        ("/chat/completions", {"model": M, "messages": [{"role": "user", "content": "x"}], "stop": [1]}),
        ("/chat/completions", {"model": M, "messages": [{"role": "user", "content": "x"}], "bogus": True}),
        ("/chat/completions", {"model": M, "messages": [{"role": "user", "content": "x"}], "top_p": 5}),
        ("/chat/completions", {"model": M, "messages": "hello"}),
        ("/completions", {"model": M}),
        ("/completions", {"model": M, "prompt": 12}),
        ("/completions", {"model": M, "prompt": [1, 2, 10 ** 9]}),
        ("/completions", {"model": M, "prompt": ["a", "b"]}),
        ("/completions", {"model": M, "prompt": "x", "echo": True}),
        ("/completions", {"model": M, "prompt": "x", "stream": 1}),
        ("/completions", {"model": M, "prompt": "x", "seed": 1.5}),
        ("/completions", b"\xff\xfe\x00garbage"),
        ("/completions", b'{"model": "' + M.encode() + b'", "prompt": "\\ud800"}'),
    ]
    for path, body in table:
        r = raw(args, path, body)
        ok = r.status_code == 400
        try:
            err = r.json()["error"]
            ok = ok and isinstance(err["message"], str) and err["type"] == "invalid_request_error"
        except Exception:  # noqa: BLE001
            ok = False
        check(ok, f"{path} {body!r:.80}: {r.status_code} {r.text[:200]}")
    check(len(table) >= 20, "at least 20 malformed bodies")

    # A body over the limit: 413, and an unknown path: 404, both OpenAI-shaped.
    r = raw(args, "/completions", b'{"model": "x", "prompt": "' + b"a" * (9 << 20) + b'"}')
    check(r.status_code == 413 and "error" in r.json(), f"oversize body: {r.status_code} {r.text[:200]}")
    r = raw(args, "/nothing", {}, method="GET")
    check(r.status_code == 404 and "error" in r.json(), f"unknown path: {r.status_code}")

    # Still serving.
    ok = client.completions.create(model=args.model, prompt="still", max_tokens=2, temperature=0)
    check(ok.usage.completion_tokens == 2, "the server serves after the faults")
    m = metrics(args.url)
    check(m['ferry_http_requests_total{endpoint="/v1/chat/completions",status="400"}'] >= 15, "400s counted")


def cmd_overflow(args, client):
    """A server with --max-batch 1 --max-queue 1: a third concurrent request gets 503 with Retry-After."""
    statuses, retry_after = [], []
    lock = threading.Lock()

    def one():
        r = raw(args, "/completions", {"model": args.model, "prompt": "Hi", "max_tokens": 300, "temperature": 0})
        with lock:
            statuses.append(r.status_code)
            if r.status_code == 503:
                retry_after.append(r.headers.get("retry-after"))
                check(r.json()["error"]["code"] == "queue_full", f"503 body {r.text}")

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    check(statuses.count(200) >= 2, f"statuses {statuses}")
    check(statuses.count(503) >= 1, f"statuses {statuses}")
    check(all(r == "1" for r in retry_after), f"Retry-After {retry_after}")
    check(set(statuses) <= {200, 503}, f"statuses {statuses}")


def long_greedy_prompt(args, n):
    """A prompt whose greedy continuation runs n tokens without an end-of-sequence token on this model (checked with
    `ferry generate`, which serve's completions equal), so a greedy request for n tokens can end only by its
    deadline or its length."""
    for prompt in ["Hi", "Hello there", "Once upon a time", "The weather today", "A B C D"]:
        if len(ferry_generate(args, ["-p", prompt, "-n", str(n)])["generated_ids"]) == n:
            return prompt
    raise SystemExit(f"no prompt of the list runs {n} greedy tokens without end-of-sequence on this model")


def cmd_timeout(args, client):
    """A server with --request-timeout 0.001: a long request times out — 504 unstreamed, an error event then
    [DONE] streamed — and is cancelled (its KV cache freed). Both requests are greedy with a prompt whose 1500
    tokens hold no end-of-sequence (a sampled one once drew it first and ended with "stop" within the millisecond),
    so nothing but the deadline can end them early: 1500 forwards take far longer than 1 ms on any CPU."""
    n = 1500
    prompt = long_greedy_prompt(args, n)
    r = raw(args, "/completions", {"model": args.model, "prompt": prompt, "max_tokens": n, "temperature": 0})
    check(r.status_code == 504 and r.json()["error"]["code"] == "timeout", f"unstreamed: {r.status_code} {r.text}")
    with httpx.Client(timeout=60) as h:
        with h.stream("POST", args.url + "/completions", headers={"Authorization": f"Bearer {args.key}"},
                      json={"model": args.model, "prompt": prompt, "max_tokens": n, "temperature": 0,
                            "stream": True}) as s:
            lines = [line for line in s.iter_lines() if line]
    check(len(lines) >= 2 and lines[-1] == "data: [DONE]", f"streamed end: {lines[-2:]}")
    check(len(lines) >= 2 and json.loads(lines[-2][6:]).get("error", {}).get("code") == "timeout",
          f"the event before [DONE] is the timeout error: {lines[-2:]}")
    m = wait_idle(args.url)
    check(m["ferry_running_sequences"] == 0 and m["ferry_kv_cache_bytes"] == 0, "timed-out sequences freed")
    check(m['ferry_sequences_total{outcome="cancelled"}'] == 2, "both timed-out requests were cancelled")


def cmd_connections(args, client):
    """More simultaneous connections than cpp-httplib's listen backlog of 5 (args.clients, 128): every one answered,
    no connection error; then the same through one pooled client (openai's httpx pool), reused after 5.5 s idle —
    past httpx's 5 s pool expiry, which raced cpp-httplib's 5 s idle close under load."""
    n = args.clients
    for round_ in range(2):
        results, errors = [None] * n, []
        start = threading.Barrier(n)

        def one(i):
            try:
                start.wait(timeout=120)
                if round_ == 0:  # a connection each
                    with httpx.Client(timeout=300) as h:
                        r = h.post(args.url + "/completions", headers={"Authorization": f"Bearer {args.key}"},
                                   json={"model": args.model, "prompt": f"Client {i}", "max_tokens": 4,
                                         "temperature": 0})
                        results[i] = (r.status_code, r.headers.get("connection"))
                else:  # one pool for every thread
                    c = client.completions.create(model=args.model, prompt=f"Client {i}", max_tokens=4,
                                                  temperature=0)
                    results[i] = (200 if c.choices[0].finish_reason in ("stop", "length") else 0, "close")
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"round {round_} client {i}: {e!r} (cause: {e.__cause__!r})")

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        check(not errors, f"{len(errors)} connection errors: {errors[:3]}")
        check(all(r is not None and r[0] == 200 for r in results), f"round {round_}: not all 200: {results[:8]}")
        if round_ == 0:
            check(all(r is not None and r[1] == "close" for r in results),
                  f"each response closes its connection (the default, no --keep-alive): {results[:4]}")
    time.sleep(5.5)
    c = client.completions.create(model=args.model, prompt="after a pause", max_tokens=2, temperature=0)
    check(len(c.choices) == 1, "a request after 5.5 s idle")


def cmd_shutdown(args, client):
    """SIGTERM while a stream runs: the stream ends cleanly ([DONE]); new requests are refused; the caller checks
    the exit code."""
    done = {}

    def streamer():
        with httpx.Client(timeout=120) as h:
            with h.stream("POST", args.url + "/completions", headers={"Authorization": f"Bearer {args.key}"},
                          json={"model": args.model, "prompt": "Hello", "max_tokens": 1900, "temperature": 0,
                                "stream": True}) as r:
                lines = [line for line in r.iter_lines() if line]
                done["last"] = lines[-1] if lines else ""

    t = threading.Thread(target=streamer)
    t.start()
    time.sleep(0.5)
    os.kill(args.pid, signal.SIGTERM)
    t.join(timeout=60)
    check(not t.is_alive(), "the stream ended after SIGTERM")
    check(done.get("last") == "data: [DONE]", f"the stream ended with {done.get('last')!r}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command")
    p.add_argument("--url", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--ferry")
    p.add_argument("--folder")
    p.add_argument("--pid", type=int)
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--sanitized", action="store_true", help="the server is an ASan build: skip the RSS check")
    args = p.parse_args()
    client = openai.OpenAI(base_url=args.url, api_key=args.key, max_retries=0, timeout=300)
    {"basic": cmd_basic, "concurrency": cmd_concurrency, "faults": cmd_faults, "overflow": cmd_overflow, "timeout": cmd_timeout,
     "connections": cmd_connections,
     "shutdown": cmd_shutdown}[args.command](args, client)
    if FAILED:
        print(f"{len(FAILED)} checks failed", file=sys.stderr)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
