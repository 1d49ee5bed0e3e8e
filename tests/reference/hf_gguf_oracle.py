"""transformers on a GGUF file (from_pretrained(folder, gguf_file=...): its own GGUF reader dequantizes every tensor
to f32 with the gguf package): the exact-arithmetic oracle of tests/models/gguf_llama_cpp_test.cc.

    hf_gguf_oracle.py MODEL.gguf OUT.json PROMPT_IDS_JSON [STEPS]

Writes {"greedy": [{"prompt", "ids", "logits": last-position logits of the prompt}...]} for each prompt.
"""
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM

STEPS = 16


def main():
    path, out, prompts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else STEPS
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                 dtype=torch.float32)
    model.eval()
    result = {"greedy": []}
    with torch.no_grad():
        for p in prompts:
            ids = torch.tensor([p])
            logits = model(ids).logits[0, -1].tolist()
            gen = model.generate(ids, max_new_tokens=steps, do_sample=False, attention_mask=torch.ones_like(ids),
                                 pad_token_id=0)
            result["greedy"].append({"prompt": p, "ids": gen[0, len(p):].tolist(), "logits": logits})
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
