"""Writes tiny random Hugging Face model folders with transformers itself, for ferry's model tests.

Each case names an architecture, config overrides, a dtype and a file format. The model is built by transformers from
that config, its weights are redrawn so that mistakes stay visible (transformers' std-0.02 init makes attention
almost uniform, so RoPE or GQA layout bugs would barely move the logits), and save_pretrained writes the folder, so
file names, tensor keys and config.json are exactly what transformers produces:

  embeddings (wte, wpe, embed_tokens)   ~ N(0, 1)
  projection weights (Linear, Conv1D, routers, stacked experts)   ~ N(0, 1/fan_in)
  biases                                ~ N(0, 0.1^2)
  norm weights                          ~ 1 + 0.1 N(0, 1);  norm biases ~ 0.1 N(0, 1)

Usage: python hf_make_folder.py --cases cases.json --out ROOT
  cases.json: [{"name": "llama_gqa_tied_f32", "architecture": "LlamaForCausalLM", "dtype": "float32",
                "format": "safetensors" | "sharded" | "bin" | "base_model", "config": {...overrides...}}, ...]
Writes ROOT/<name>/ for every case (config.json, model.safetensors | model-0000N-of-0000M.safetensors + index |
pytorch_model.bin). Prints one line per folder.
"""

import argparse
import json
import math
import os
import sys

for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(var, "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers.pytorch_utils import Conv1D  # noqa: E402

CONFIG_CLASSES = {
    "LlamaForCausalLM": "LlamaConfig",
    "MistralForCausalLM": "MistralConfig",
    "Qwen2ForCausalLM": "Qwen2Config",
    "Qwen3ForCausalLM": "Qwen3Config",
    "MixtralForCausalLM": "MixtralConfig",
    "Qwen2MoeForCausalLM": "Qwen2MoeConfig",
    "Qwen3MoeForCausalLM": "Qwen3MoeConfig",
    "GPT2LMHeadModel": "GPT2Config",
    "GPTJForCausalLM": "GPTJConfig",
    "GPTNeoXForCausalLM": "GPTNeoXConfig",
    "OPTForCausalLM": "OPTConfig",
    "Phi3ForCausalLM": "Phi3Config",
    "Gemma2ForCausalLM": "Gemma2Config",
    "Gemma3ForCausalLM": "Gemma3TextConfig",
    "BloomForCausalLM": "BloomConfig",
}

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def redraw_weights(model, generator):
    """Draws every parameter as the module docstring says; a tied parameter is drawn once (by its first owner)."""
    seen = set()

    def normal(shape, std=1.0, mean=0.0):
        return torch.randn(shape, generator=generator, dtype=torch.float32) * std + mean

    with torch.no_grad():
        for _, module in model.named_modules():
            params = dict(module.named_parameters(recurse=False))
            weight, bias = params.get("weight"), params.get("bias")
            kind = type(module).__name__
            if weight is not None and id(weight) not in seen:
                seen.add(id(weight))
                if isinstance(module, torch.nn.Embedding):
                    weight.copy_(normal(weight.shape))
                elif isinstance(module, torch.nn.Linear) or kind.endswith("TopKRouter"):
                    weight.copy_(normal(weight.shape, 1.0 / math.sqrt(weight.shape[1])))
                elif isinstance(module, Conv1D):  # stored [in, out]
                    weight.copy_(normal(weight.shape, 1.0 / math.sqrt(weight.shape[0])))
                elif isinstance(module, torch.nn.LayerNorm) or kind.endswith("RMSNorm"):
                    weight.copy_(normal(weight.shape, 0.1, 1.0))
                else:
                    raise SystemExit(f"hf_make_folder: no rule for the weight of {kind}")
            if kind.endswith("Experts"):  # experts stacked in 3-D parameters [E, out, in] (transformers 5)
                for p in params.values():
                    if id(p) not in seen:
                        seen.add(id(p))
                        p.copy_(normal(p.shape, 1.0 / math.sqrt(p.shape[-1])))
            if bias is not None and id(bias) not in seen:
                seen.add(id(bias))
                bias.copy_(normal(bias.shape, 0.1))
        leftover = [n for n, p in model.named_parameters() if id(p) not in seen]
        if leftover:
            raise SystemExit(f"hf_make_folder: parameters not redrawn: {leftover}")


def make_folder(case, root):
    arch = case["architecture"]
    config_cls = getattr(transformers, CONFIG_CLASSES[arch])
    config = config_cls(**case.get("config", {}))
    config.architectures = [arch]
    model_cls = getattr(transformers, arch)
    torch.manual_seed(0)
    model = model_cls(config).eval()
    generator = torch.Generator().manual_seed(case.get("seed", 1234))
    redraw_weights(model, generator)
    dtype = DTYPES[case["dtype"]]
    model = model.to(dtype)
    out = os.path.join(root, case["name"])
    os.makedirs(out, exist_ok=True)
    fmt = case.get("format", "safetensors")
    if fmt == "safetensors":
        model.save_pretrained(out)
    elif fmt == "sharded":
        model.save_pretrained(out, max_shard_size=case.get("max_shard_size", "20KB"))
    elif fmt == "base_model":
        # The bare base model's weights under the causal LM's config.json, as bigscience's BLOOM uploads are
        # ("h.0.self_attention...", no "transformer." prefix; the tied head is not stored).
        model.base_model.save_pretrained(out)
        model.config.architectures = [arch]  # save_pretrained wrote the base model's class name
        model.config.save_pretrained(out)
    elif fmt == "bin":
        # transformers 5 writes safetensors only; a .bin folder is what older versions wrote: config.json +
        # torch.save(state_dict) without the tied duplicate.
        model.config.save_pretrained(out)
        state = model.state_dict()
        if getattr(model.config, "tie_word_embeddings", False):
            state.pop("lm_head.weight", None)
        torch.save(state, os.path.join(out, "pytorch_model.bin"))
    else:
        raise SystemExit(f"hf_make_folder: unknown format {fmt!r}")
    files = sorted(f for f in os.listdir(out) if f != "config.json")
    print(f"{case['name']}: {arch} {case['dtype']} {fmt} -> {', '.join(files)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.cases) as f:
        cases = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    for case in cases:
        make_folder(case, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
