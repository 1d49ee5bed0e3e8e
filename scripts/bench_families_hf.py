"""transformers' own speed on a folder, as `ferry bench` measures it: prompt processing of P random ids (pp) and
T single-token decode steps after one token (tg), tokens/s, the weights in the folder's dtype, resident on the CPU.

    bench_families_hf.py FOLDER THREADS P T
Prints {"pp": tok/s, "tg": tok/s} (one round; scripts/bench-families alternates rounds with ferry's).
"""
import json
import sys
import time

import torch
from transformers import AutoModelForCausalLM, DynamicCache


def main():
    folder, threads, pp, tg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype="auto").eval()
    g = torch.Generator().manual_seed(0)
    vocab = model.config.get_text_config().vocab_size
    ids = torch.randint(0, vocab, (1, pp), generator=g)
    with torch.inference_mode():
        t0 = time.perf_counter()
        model(ids, past_key_values=DynamicCache(config=model.config), use_cache=True, logits_to_keep=1)
        pp_s = pp / (time.perf_counter() - t0)
        cache = DynamicCache(config=model.config)
        model(ids[:, :1], past_key_values=cache, use_cache=True, logits_to_keep=1)
        t0 = time.perf_counter()
        for step in range(tg):
            next_id = torch.randint(0, vocab, (1, 1), generator=g)
            model(next_id, past_key_values=cache, use_cache=True, logits_to_keep=1)
        tg_s = tg / (time.perf_counter() - t0)
    print(json.dumps({"pp": pp_s, "tg": tg_s}))


if __name__ == "__main__":
    main()
