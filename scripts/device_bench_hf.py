#!/usr/bin/env python3
"""The same model and budget through transformers + Accelerate, for scripts/device-check.

Loads FOLDER with AutoModelForCausalLM.from_pretrained(dtype=bfloat16, device_map="auto",
max_memory={0: GPU, "cpu": CPU}) (local files only), greedily generates N tokens after the given prompt ids, and
writes one JSON object: load time, where the weights went (bytes per device from hf_device_map), prefill time,
decode seconds per token, the generated ids. With --ferry-json (the output of `ferry generate --json --logits K`
for the same prompt ids and budget) it also compares the greedy ids and the first steps' logits. Then (unless
--no-f32) the f32 reference: the same weights widened to f32, the whole model on the GPU, no TF32; ferry's ids and
logits and transformers' bf16 ones are each compared with it ("f32_reference").

  device_bench_hf.py --model DIR --max-memory-gpu BYTES --max-memory-cpu BYTES --prompt-ids 1,2,3 -n 32 \
      [--reps 2] [--ferry-json FILE] [--out FILE] [--cpu-smoke]

Decode s/token = (time of generate(N tokens) - time of generate(1 token)) / (N - 1), both forced to exactly that
many tokens (min_new_tokens), the median over --reps, after a warm-up. The ids compared with ferry's come from a
separate greedy run that stops at EOS like `ferry generate` does. With no CUDA device it writes
{"error": "no CUDA device"} and exits 0; --cpu-smoke instead runs the whole thing on the CPU (device_map={"": "cpu"})
to check the script's logic on a machine without a GPU.
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def parse_bytes(text):
    """'1234', '4GiB', '4GB' -> int bytes (GiB = 2^30, GB = 10^9), as ferry's --max-memory reads them."""
    t = str(text).strip()
    units = [("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40), ("KB", 10**3), ("MB", 10**6),
             ("GB", 10**9), ("TB", 10**12), ("B", 1)]
    for suffix, mult in units:
        if t.endswith(suffix):
            return int(float(t[: -len(suffix)]) * mult)
    return int(t)


def compare(ids_a, logits_a, ids_b, logits_b):
    """Greedy ids a against b (equal? first mismatch?) and, for each step up to the first mismatch, the logits
    (max |a - b|, relative L2, same argmax). logits_*: lists of 1-D float tensors, one per step."""
    import torch

    n = min(len(ids_a), len(ids_b))
    first = next((i for i in range(n) if ids_a[i] != ids_b[i]), None)
    if first is None and len(ids_a) != len(ids_b):
        first = n
    out = {"ids_equal": ids_a == ids_b, "first_mismatch": first, "len_a": len(ids_a), "len_b": len(ids_b)}
    diffs = []
    for step in range(min(len(logits_a), len(logits_b))):
        if first is not None and step > first:
            break  # after a different token the prefixes differ: nothing to compare
        a, b = logits_a[step].float(), logits_b[step].float()
        if a.shape != b.shape:
            diffs.append({"step": step, "error": f"shape {list(a.shape)} vs {list(b.shape)}"})
            continue
        d = (a - b).abs()
        diffs.append({"step": step, "max_abs_diff": float(d.max()), "max_abs_ref": float(b.abs().max()),
                      "rel_l2": float((a - b).norm() / max(float(b.norm()), 1e-30)),
                      "argmax_equal": int(a.argmax()) == int(b.argmax())})
    out["logits"] = diffs
    if diffs:
        out["max_rel_l2"] = max(d.get("rel_l2", 0.0) for d in diffs)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--max-memory-gpu", default=None, help="bytes for cuda:0 (omit: Accelerate's own)")
    ap.add_argument("--max-memory-cpu", default=None)
    ap.add_argument("--prompt-ids", required=True)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--ferry-json", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--cpu-smoke", action="store_true")
    ap.add_argument("--no-f32", action="store_true", help="skip the f32 reference run")
    args = ap.parse_args()

    result = {"model": args.model, "n": args.n}

    def finish(code=0):
        text = json.dumps(result)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
        print(text if len(text) < 4000 else json.dumps({k: v for k, v in result.items() if k != "generated_ids"}))
        sys.exit(code)

    t_import = time.perf_counter()
    try:
        import torch
        import transformers
        import accelerate
        from transformers import AutoModelForCausalLM
    except Exception as e:  # noqa: BLE001
        result["error"] = f"import failed: {e!r}"
        finish(0)
    result["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                          "accelerate": accelerate.__version__}
    result["import_s"] = time.perf_counter() - t_import

    has_cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0
    if not has_cuda and not args.cpu_smoke:
        result["error"] = "no CUDA device"
        finish(0)
    result["device"] = torch.cuda.get_device_name(0) if has_cuda else "cpu (--cpu-smoke)"

    if has_cuda and not args.cpu_smoke:
        max_memory = {}
        if args.max_memory_gpu is not None:
            max_memory[0] = parse_bytes(args.max_memory_gpu)
        if args.max_memory_cpu is not None:
            max_memory["cpu"] = parse_bytes(args.max_memory_cpu)
        load_kw = {"device_map": "auto", "max_memory": max_memory or None}
        result["max_memory"] = {str(k): v for k, v in max_memory.items()}
    else:
        load_kw = {"device_map": {"": "cpu"}}
    sync = torch.cuda.synchronize if has_cuda else (lambda: None)

    t0 = time.perf_counter()
    try:
        try:
            model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16, local_files_only=True,
                                                         **load_kw)
        except TypeError:  # transformers < 4.56 spells it torch_dtype
            model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16,
                                                         local_files_only=True, **load_kw)
    except Exception as e:  # noqa: BLE001
        result["error"] = f"from_pretrained failed: {e!r}"
        finish(0)
    model.eval()
    sync()
    result["load_s"] = time.perf_counter() - t0

    # Bytes per device: each parameter and buffer goes where the longest matching hf_device_map prefix says.
    dmap = getattr(model, "hf_device_map", None) or {"": "cpu"}
    per_device = {}
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        best = None
        for prefix in dmap:
            if prefix == "" or name == prefix or name.startswith(prefix + "."):
                if best is None or len(prefix) > len(best):
                    best = prefix
        dev = dmap.get(best, "?") if best is not None else "?"
        dev = f"cuda:{dev}" if isinstance(dev, int) else str(dev)
        per_device[dev] = per_device.get(dev, 0) + t.numel() * t.element_size()
    result["device_bytes"] = per_device
    result["device_map_entries"] = len(dmap)

    input_device = "cuda:0" if (has_cuda and not args.cpu_smoke) else "cpu"
    ids = [int(x) for x in args.prompt_ids.split(",") if x.strip()]
    input_ids = torch.tensor([ids], dtype=torch.long, device=input_device)
    attn = torch.ones_like(input_ids)
    eos = model.generation_config.eos_token_id
    pad = eos[0] if isinstance(eos, list) else eos
    base = dict(do_sample=False, num_beams=1, pad_token_id=pad if pad is not None else 0, attention_mask=attn)
    # A random model's config may carry sampling defaults; greedy means greedy.
    for k in ("temperature", "top_p", "top_k"):
        if hasattr(model.generation_config, k):
            setattr(model.generation_config, k, None)

    @torch.inference_mode()
    def gen(n, forced, **kw):
        extra = {"min_new_tokens": n} if forced else {}
        return model.generate(input_ids, max_new_tokens=n, **base, **extra, **kw)

    def timed(n):
        sync()
        t = time.perf_counter()
        gen(n, True)
        sync()
        return time.perf_counter() - t

    try:
        gen(2, True)  # warm-up: kernels, allocator, hooks
        sync()
        # Greedy ids as ferry generate makes them (stops at EOS), with the raw logits of each step.
        out = gen(args.n, False, return_dict_in_generate=True, output_logits=True)
        gen_ids = out.sequences[0, len(ids):].tolist()
        hf_logits = [lg[0].float().cpu() for lg in (out.logits or [])]
        result["generated_ids"] = gen_ids
        t1s, tns = [], []
        for _ in range(max(1, args.reps)):
            t1s.append(timed(1))
            tns.append(timed(args.n))
        t1, tn = statistics.median(t1s), statistics.median(tns)
        result["prefill_s"] = t1
        result["prefill_tokens"] = len(ids)
        result["generate_n_s"] = tn
        result["decode_s_per_token"] = (tn - t1) / max(1, args.n - 1)
        result["decode_tokens_per_s"] = 1.0 / result["decode_s_per_token"] if result["decode_s_per_token"] > 0 else None
        result["t1_runs"], result["tn_runs"] = t1s, tns
    except Exception as e:  # noqa: BLE001
        result["error"] = f"generate failed: {e!r}"
        finish(0)

    f_ids, f_logits = None, None
    if args.ferry_json:
        cmp = {}
        try:
            with open(args.ferry_json) as f:
                fj = json.loads(f.read().strip().splitlines()[-1])
            f_ids = [int(x) for x in fj.get("generated_ids", [])]
            f_logits = [torch.tensor(fl, dtype=torch.float32) for fl in (fj.get("logits") or [])]
            if [int(x) for x in fj.get("prompt_ids", ids)] != ids:
                cmp["warning"] = "ferry's prompt_ids differ from the ones given here"
            cmp.update(compare(f_ids, f_logits, gen_ids, hf_logits))
            cmp["ferry_len"], cmp["hf_len"] = cmp.pop("len_a"), cmp.pop("len_b")
            ft = fj.get("timings", {})
            if ft.get("decode_s") and len(f_ids) > 1:
                cmp["ferry_generate_decode_s_per_token"] = ft["decode_s"] / (len(f_ids) - 1)
        except Exception as e:  # noqa: BLE001
            cmp["error"] = f"cannot compare with {args.ferry_json}: {e!r}"
        result["vs_ferry"] = cmp

    # The f32 reference: the same bf16 weights widened to f32 (exact), computed in f32 without TF32, the whole model
    # on the GPU. transformers in bf16 rounds every activation to bf16; ferry keeps activations in f32. Both are
    # compared with this reference: ferry's deviation next to transformers' own bf16 deviation.
    if not args.no_f32:
        ref = {}
        try:
            del model
            if has_cuda:
                torch.cuda.empty_cache()
            try:
                torch.backends.cuda.matmul.fp32_precision = "ieee"
            except Exception:  # noqa: BLE001  (older torch)
                torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            dev = 0 if (has_cuda and not args.cpu_smoke) else "cpu"
            try:
                m32 = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32, local_files_only=True,
                                                           device_map={"": dev})
            except TypeError:
                m32 = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32,
                                                           local_files_only=True, device_map={"": dev})
            m32.eval()
            for k in ("temperature", "top_p", "top_k"):
                if hasattr(m32.generation_config, k):
                    setattr(m32.generation_config, k, None)
            with torch.inference_mode():
                o32 = m32.generate(input_ids, max_new_tokens=args.n, **base, return_dict_in_generate=True,
                                   output_logits=True)
            ids32 = o32.sequences[0, len(ids):].tolist()
            lg32 = [lg[0].float().cpu() for lg in (o32.logits or [])]
            ref["generated_ids"] = ids32
            ref["hf_bf16_vs_f32"] = compare(gen_ids, hf_logits, ids32, lg32)
            if f_ids is not None:
                ref["ferry_vs_f32"] = compare(f_ids, f_logits, ids32, lg32)
        except Exception as e:  # noqa: BLE001
            ref["error"] = f"f32 reference failed: {e!r}"
        result["f32_reference"] = ref
    finish(0)


if __name__ == "__main__":
    main()
