"""llama.cpp itself (through llama-cpp-python) on a GGUF file: the oracle of tests/models/gguf_llama_cpp_test.cc.

    llama_cpp_oracle.py MODEL.gguf OUT.json [TYPE]

With TYPE (q8_0, q4_0, q5_0, q5_1, q4_k_m, q5_k_m, q6_k), MODEL is first requantized by llama.cpp's own quantizer
(llama_model_quantize) into OUT.json's folder as TYPE.gguf, and the oracle runs on that file ("model" in the JSON).

Writes {"tokenize": [{"text", "ids"}...], "greedy": [{"prompt", "ids"}...], "logits": [[...]]}: llama.cpp's ids for
texts (special tokens parsed, no BOS added: the file's add_bos_token is false for SmolLM2), greedy continuations of
prompt ids, and the last-position logits of each greedy prompt (llama.cpp computes them with its own kernels and
quantized activations, so they are compared with a tolerance).
"""
import ctypes
import json
import os
import sys

import numpy as np
import llama_cpp
from llama_cpp import Llama

FTYPES = {"q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0", "q5_0": "LLAMA_FTYPE_MOSTLY_Q5_0",
          "q5_1": "LLAMA_FTYPE_MOSTLY_Q5_1", "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M",
          "q5_k_m": "LLAMA_FTYPE_MOSTLY_Q5_K_M", "q6_k": "LLAMA_FTYPE_MOSTLY_Q6_K"}

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


def quantize(src, dst, kind):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = getattr(llama_cpp, FTYPES[kind])
    p.allow_requantize = True
    p.nthread = 2
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p)) != 0:
        raise SystemExit(f"llama_model_quantize to {kind} failed")


def main():
    path, out = sys.argv[1:3]
    if len(sys.argv) > 3:
        quantized = os.path.join(os.path.dirname(out), sys.argv[3] + ".gguf")
        quantize(path, quantized, sys.argv[3])
        path = quantized
    llm = Llama(model_path=path, n_ctx=256, n_threads=2, n_batch=64, logits_all=True, verbose=False, seed=0)
    result = {"model": path, "tokenize": [], "greedy": [], "logits": []}
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
