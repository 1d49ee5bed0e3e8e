"""Golden logits from Hugging Face transformers for ferry's model tests.

For each model folder: loads it with AutoModelForCausalLM.from_pretrained in the folder's own dtype (eager attention,
CPU), runs a fixed random prompt in one forward (prefill), then 16 greedy decode steps with the KV cache, one token
per forward. For f16/bf16 folders it also reruns the same tokens with the weights upcast to f32, which is what ferry
computes (f32 activations over f16/bf16 weights), so ferry can be held to f32 tolerances as well. On CPUs with
AVX512_BF16 ferry rounds every linear layer's input to bf16 for bf16 weights (vdpbf16ps kernels): for bf16 folders a
third run does that too (f32 weights, each nn.Linear's input rounded to bf16 by a forward pre-hook).

Writes FOLDER.golden.safetensors next to each folder (outside it, so checkpoint discovery never sees it):
  input_ids       i64 [T]        the prompt
  prefill_logits  f32 [T, V]     logits of every prompt position
  decode_tokens   i64 [16]       the greedy tokens fed one by one (decode_tokens[0] = argmax of the last prompt row)
  decode_logits   f32 [16, V]    logits after feeding decode_tokens[i]
  prefill_logits_f32, decode_logits_f32   the same with f32 weights (f16/bf16 folders only; same decode_tokens)
  prefill_logits_f32_bf16x, decode_logits_f32_bf16x   the same with f32 weights and bf16-rounded linear inputs
                                                      (bf16 folders only)

Usage: python hf_logits.py FOLDER... [--prompt-length 11] [--steps 16] [--seed 7]
"""

import argparse
import os
import sys

for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(var, "1")

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache  # noqa: E402
from bf16_linear_inputs import bf16_functional_linear_inputs, round_linear_inputs_to_bf16  # noqa: E402


def load(folder, dtype):
    extra = {}
    if getattr(AutoConfig.from_pretrained(folder), "num_experts_per_tok", None):
        extra["experts_implementation"] = "eager"  # the per-expert loop of the modeling file, not grouped_mm
    return AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="eager", **extra).eval()


def round_embed_scales(model, dtype):
    """Gemma's scaled embeddings multiply by embed_scale cast to the weights' dtype (bf16: sqrt(48) = 6.928 -> 6.9375).
    ferry does the same over f32 activations, so the f32 runs of a half-precision folder use the rounded value too."""
    for module in model.modules():
        if hasattr(module, "scalar_embed_scale") and isinstance(getattr(module, "embed_scale", None), torch.Tensor):
            module.embed_scale.fill_(torch.tensor(module.scalar_embed_scale, dtype=dtype).float())
    return model


def run(model, input_ids, decode_tokens=None, steps=16):
    """Prefill, then `steps` decode forwards. Feeds decode_tokens when given (teacher forcing), else greedy."""
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        out = model(input_ids=input_ids[None, :], past_key_values=cache, use_cache=True)
        prefill = out.logits[0].float()
        fed, rows = [], []
        nxt = int(prefill[-1].argmax())
        for i in range(steps):
            token = int(decode_tokens[i]) if decode_tokens is not None else nxt
            fed.append(token)
            out = model(input_ids=torch.tensor([[token]]), past_key_values=cache, use_cache=True)
            row = out.logits[0, -1].float()
            rows.append(row)
            nxt = int(row.argmax())
    return prefill, torch.tensor(fed, dtype=torch.int64), torch.stack(rows)


def golden(folder, prompt_length, steps, seed):
    config = AutoConfig.from_pretrained(folder)
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or torch.float32
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, config.vocab_size, (prompt_length,), generator=generator, dtype=torch.int64)

    prefill, tokens, decode = run(load(folder, dtype), input_ids, steps=steps)
    tensors = {
        "input_ids": input_ids,
        "prefill_logits": prefill.contiguous(),
        "decode_tokens": tokens,
        "decode_logits": decode.contiguous(),
    }
    if dtype != torch.float32:
        model = round_embed_scales(load(folder, torch.float32), dtype)
        prefill32, _, decode32 = run(model, input_ids, decode_tokens=tokens, steps=steps)
        tensors["prefill_logits_f32"] = prefill32.contiguous()
        tensors["decode_logits_f32"] = decode32.contiguous()
    if dtype == torch.bfloat16:
        model = round_linear_inputs_to_bf16(round_embed_scales(load(folder, torch.float32), dtype))
        with bf16_functional_linear_inputs():  # the routers' and stacked experts' F.linear calls too
            prefill_x, _, decode_x = run(model, input_ids, decode_tokens=tokens, steps=steps)
        tensors["prefill_logits_f32_bf16x"] = prefill_x.contiguous()
        tensors["decode_logits_f32_bf16x"] = decode_x.contiguous()
    save_file(tensors, os.path.normpath(folder) + ".golden.safetensors")
    print(f"{folder}: {str(dtype).replace('torch.', '')}, prompt {prompt_length}, {steps} decode steps, "
          f"tokens {tokens.tolist()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--prompt-length", type=int, default=11)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    for folder in args.folders:
        golden(folder, args.prompt_length, args.steps, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
