"""The T5 benchmark's transformers side (scripts/bench-t5): makes the T5-v1.1-large-shaped random folder once, and
times transformers on it in the same configuration as ferry bench: the encoder over P input tokens (tokens/s) and
greedy decoding of N tokens with the cache (tokens/s), bf16 weights, CPU, THREADS threads, best of R runs.

Usage: python bench_t5_hf.py FOLDER [--make] [-p 64] [-n 16] [-r 2] [-t 2] [--dtype bfloat16|float32]
(--dtype float32 upcasts the bf16 weights: transformers' fastest CPU path where the CPU has no bf16 instructions.)
Prints one JSON object: {"enc_tokens_per_s": ..., "dec_tokens_per_s": ...}.
"""

import argparse
import json
import os
import time

for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(var, "1")

import torch  # noqa: E402
from transformers import T5Config, T5ForConditionalGeneration  # noqa: E402


def make(folder):
    # google/t5-v1_1-large's shape: d_model 1024, d_ff 2816, 24 + 24 layers, 16 heads of 64, vocab 32128.
    config = T5Config(vocab_size=32128, d_model=1024, d_kv=64, d_ff=2816, num_layers=24, num_heads=16,
                      feed_forward_proj="gated-gelu", tie_word_embeddings=False, dropout_rate=0.0)
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = T5ForConditionalGeneration(config).to(torch.bfloat16)
    model.save_pretrained(folder, max_shard_size="500MB")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("folder")
    p.add_argument("--make", action="store_true")
    p.add_argument("-p", type=int, default=64)
    p.add_argument("-n", type=int, default=16)
    p.add_argument("-r", type=int, default=2)
    p.add_argument("-t", type=int, default=2)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    a = p.parse_args()
    if a.make:
        make(a.folder)
        return
    torch.set_num_threads(a.t)
    model = T5ForConditionalGeneration.from_pretrained(a.folder, dtype=getattr(torch, a.dtype)).eval()
    g = torch.Generator().manual_seed(1)
    enc_best = dec_best = 0.0
    with torch.no_grad():
        for r in range(a.r):
            ids = torch.randint(2, model.config.vocab_size, (1, a.p), generator=g)
            t0 = time.perf_counter()
            enc = model.get_encoder()(input_ids=ids).last_hidden_state
            enc_best = max(enc_best, a.p / (time.perf_counter() - t0))
            cache, tok = None, torch.tensor([[0]])
            t0 = time.perf_counter()
            for _ in range(a.n):
                out = model(encoder_outputs=(enc,), decoder_input_ids=tok, past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                tok = out.logits[:, -1:].argmax(-1)
            dec_best = max(dec_best, a.n / (time.perf_counter() - t0))
    print(json.dumps({"enc_tokens_per_s": enc_best, "dec_tokens_per_s": dec_best}))


if __name__ == "__main__":
    main()
