"""llama.cpp's logits for token ids on a GGUF file (for tests/models/gguf_export_test.cc: files ferry writes).

    llama_cpp_logits.py MODEL.gguf OUT.json IDS [TEXT...] [--f32-cache] [--quantize=TYPE] [--greedy=N]

IDS is a comma-separated prompt; OUT.json gets {"logits": [...last position...], "tokenize": [[ids]...]} with
llama.cpp's ids (BOS as the file says, special tokens parsed) for each TEXT. --f32-cache keeps llama.cpp's KV cache
in f32 (its default is f16, which alone moves the logits by ~1e-4 of their scale) for comparisons of f32 files.
--quantize=TYPE first requantizes MODEL with llama.cpp's own quantizer (llama_cpp_oracle.py's types: q4_k_m, ...)
into OUT.json's folder and runs on that file (OUT.json's "model"); --greedy=N adds llama.cpp's greedy continuation
of N tokens after IDS ("greedy").
"""
import json
import os
import sys

import numpy as np
from llama_cpp import Llama


def main():
    options = {a.split("=")[0]: a.split("=", 1)[-1] for a in sys.argv[1:] if a.startswith("--")}
    argv = [a for a in sys.argv if not a.startswith("--")]
    path, out, ids = argv[1], argv[2], [int(i) for i in argv[3].split(",")]
    if "--quantize" in options:
        from llama_cpp_oracle import quantize
        quantized = os.path.splitext(out)[0] + "." + options["--quantize"] + ".gguf"
        quantize(path, quantized, options["--quantize"])
        path = quantized
    cache = {"type_k": 0, "type_v": 0} if "--f32-cache" in options else {}  # GGML_TYPE_F32
    llm = Llama(model_path=path, n_ctx=128, n_threads=2, n_batch=64, logits_all=True, verbose=False, seed=0,
                **cache)
    llm.eval(ids)
    result = {"model": path, "logits": np.asarray(llm.scores[len(ids) - 1], dtype=np.float64).tolist(),
              "tokenize": [llm.tokenize(t.encode("utf-8"), add_bos=True, special=True) for t in argv[4:]]}
    if "--greedy" in options:
        greedy = []
        for tok in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
            greedy.append(int(tok))
            if len(greedy) == int(options["--greedy"]):
                break
        result["greedy"] = greedy
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
