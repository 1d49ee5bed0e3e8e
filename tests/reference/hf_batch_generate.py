"""Greedy ids from transformers' generate on a left-padded batch, the oracle for ferry's batched generation.

For each model folder: loads it in f32 (eager attention, CPU), left-pads the prompts with pad id 0 and an
attention_mask (transformers' way of batching sequences of different lengths), and runs generate(do_sample=False,
max_new_tokens=N) once for the whole batch. Writes OUT as JSON: {folder name: [[generated ids] per prompt]}, each
row the new tokens only, cut after the first EOS-free max_new_tokens (no EOS is configured).

Usage: python hf_batch_generate.py OUT --prompts '[[1,2,3],[4]]' --max-new-tokens 8 FOLDER...
"""

import argparse
import json
import os

for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(var, "1")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("folders", nargs="+")
    p.add_argument("--prompts", required=True)
    p.add_argument("--max-new-tokens", type=int, default=8)
    a = p.parse_args()
    prompts = json.loads(a.prompts)
    width = max(len(q) for q in prompts)
    input_ids = torch.tensor([[0] * (width - len(q)) + q for q in prompts], dtype=torch.long)
    mask = torch.tensor([[0] * (width - len(q)) + [1] * len(q) for q in prompts], dtype=torch.long)
    result = {}
    for folder in a.folders:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = 0
        with torch.no_grad():
            out = model.generate(input_ids=input_ids, attention_mask=mask, do_sample=False,
                                 max_new_tokens=a.max_new_tokens, min_new_tokens=a.max_new_tokens)
        result[os.path.basename(os.path.normpath(folder))] = out[:, width:].tolist()
    with open(a.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
