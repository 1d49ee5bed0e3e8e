"""llama.cpp's logits for token ids on a GGUF file (for tests/models/gguf_export_test.cc: files ferry writes).

    llama_cpp_logits.py MODEL.gguf OUT.json IDS [TEXT...] [--f32-cache]

IDS is a comma-separated prompt; OUT.json gets {"logits": [...last position...], "tokenize": [[ids]...]} with
llama.cpp's ids (BOS as the file says, special tokens parsed) for each TEXT. --f32-cache keeps llama.cpp's KV cache
in f32 (its default is f16, which alone moves the logits by ~1e-4 of their scale) for comparisons of f32 files.
"""
import json
import sys

import numpy as np
from llama_cpp import Llama


def main():
    f32_cache = "--f32-cache" in sys.argv
    argv = [a for a in sys.argv if a != "--f32-cache"]
    path, out, ids = argv[1], argv[2], [int(i) for i in argv[3].split(",")]
    cache = {"type_k": 0, "type_v": 0} if f32_cache else {}  # GGML_TYPE_F32
    llm = Llama(model_path=path, n_ctx=128, n_threads=2, n_batch=64, logits_all=True, verbose=False, seed=0,
                **cache)
    llm.eval(ids)
    result = {"logits": np.asarray(llm.scores[len(ids) - 1], dtype=np.float64).tolist(),
              "tokenize": [llm.tokenize(t.encode("utf-8"), add_bos=True, special=True) for t in argv[4:]]}
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
