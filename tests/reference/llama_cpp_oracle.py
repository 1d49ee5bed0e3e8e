"""llama.cpp itself (through llama-cpp-python) on a GGUF file: the oracle of tests/models/gguf_llama_cpp_test.cc.

    llama_cpp_oracle.py MODEL.gguf OUT.json

Writes {"tokenize": [{"text", "ids"}...], "greedy": [{"prompt", "ids"}...], "logits": [[...]]}: llama.cpp's ids for
texts (special tokens parsed, no BOS added: the file's add_bos_token is false for SmolLM2), greedy continuations of
prompt ids, and the last-position logits of each greedy prompt (llama.cpp computes them with its own kernels and
quantized activations, so they are compared with a tolerance).
"""
import json
import sys

import numpy as np
from llama_cpp import Llama

TEXTS = [
    "Hello world! The year 2024 was 12345 times better.",
    "The capital of France is",
    "  leading spaces,\ttabs\nand\n\nnewlines  ",
    "naïve café – “quotes” — ü ß 中文 日本語 🙂",
    "def f(x):\n    return x**2 + 3.14159  # comment",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "don't won't I'll we've they're it's",
    "",
]
PROMPTS = [[504, 3575, 282, 4649, 314], [1, 9690, 198, 2683, 359, 253, 5356, 30, 2, 198, 1, 520, 9531, 198]]
STEPS = 16


def main():
    path, out = sys.argv[1:3]
    llm = Llama(model_path=path, n_ctx=256, n_threads=2, n_batch=64, logits_all=True, verbose=False, seed=0)
    result = {"tokenize": [], "greedy": [], "logits": []}
    for t in TEXTS:
        result["tokenize"].append({"text": t, "ids": llm.tokenize(t.encode("utf-8"), add_bos=False, special=True)})
    for p in PROMPTS:
        llm.reset()
        llm.eval(p)
        result["logits"].append(np.asarray(llm.scores[len(p) - 1], dtype=np.float64).tolist())
        ids = []
        for tok in llm.generate(p, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
            ids.append(int(tok))
            if len(ids) == STEPS:
                break
        result["greedy"].append({"prompt": p, "ids": ids})
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
