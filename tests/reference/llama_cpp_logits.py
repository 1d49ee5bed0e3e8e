"""llama.cpp's logits for token ids on a GGUF file (for tests/models/gguf_export_test.cc: files ferry writes).

    llama_cpp_logits.py MODEL.gguf OUT.json IDS [TEXT...]

IDS is a comma-separated prompt; OUT.json gets {"logits": [...last position...], "tokenize": [[ids]...]} with
llama.cpp's ids (BOS as the file says, special tokens parsed) for each TEXT.
"""
import json
import sys

import numpy as np
from llama_cpp import Llama


def main():
    path, out, ids = sys.argv[1], sys.argv[2], [int(i) for i in sys.argv[3].split(",")]
    llm = Llama(model_path=path, n_ctx=128, n_threads=2, n_batch=64, logits_all=True, verbose=False, seed=0)
    llm.eval(ids)
    result = {"logits": np.asarray(llm.scores[len(ids) - 1], dtype=np.float64).tolist(),
              "tokenize": [llm.tokenize(t.encode("utf-8"), add_bos=True, special=True) for t in sys.argv[4:]]}
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
