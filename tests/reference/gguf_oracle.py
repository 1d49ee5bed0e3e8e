"""GGUF oracles from the `gguf` package (llama.cpp's own Python library), for tests/core/quant_test.cc and
tests/io/gguf_test.cc.

    gguf_oracle.py blocks OUT_DIR     random blocks of every quantized type + gguf.quants.dequantize of them
    gguf_oracle.py file OUT_DIR       a GGUF written by gguf.GGUFWriter + a JSON of what it holds
    gguf_oracle.py quantize OUT_DIR   random f32 rows + gguf.quants.quantize of them to q8_0, q4_0, q4_1, q5_0, q5_1

Blocks: OUT_DIR/<type>.blocks (raw bytes) and OUT_DIR/<type>.f32 (the expected floats, little-endian). The f16
scale fields are drawn finite (random bytes elsewhere), so every value is a number.
Quantize: OUT_DIR/quantize.f32 (the input: 64 blocks of 32, some all-zero or with repeated extremes) and
OUT_DIR/<type>.quantized (the expected bytes).
"""
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

# type -> (block bytes, byte offsets of f16 scale fields)
BLOCKS = {
    Q.Q4_0: (18, [0]), Q.Q4_1: (20, [0, 2]), Q.Q5_0: (22, [0]), Q.Q5_1: (24, [0, 2]), Q.Q8_0: (34, [0]),
    Q.Q4_K: (144, [0, 2]), Q.Q5_K: (176, [0, 2]), Q.Q6_K: (210, [208]),
}


def blocks(out):
    rng = np.random.default_rng(20261201)
    for qt, (size, scales) in BLOCKS.items():
        n = 64
        raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
        for off in scales:
            f = rng.uniform(-3, 3, size=n).astype(np.float16)
            f[0] = 0.0
            raw[:, off:off + 2] = f.view(np.uint8).reshape(n, 2)
        values = gguf.quants.dequantize(raw.reshape(-1), qt).astype(np.float32).reshape(-1)
        name = qt.name.lower()
        raw.tofile(os.path.join(out, name + ".blocks"))
        values.tofile(os.path.join(out, name + ".f32"))


def quantize(out):
    rng = np.random.default_rng(20261202)
    x = rng.normal(0, 1, size=(64, 32)).astype(np.float32)
    x[1] = 0.0                      # an all-zero block: scale 0
    x[2, :] = 0.5                   # constant block
    x[3, 5] = -x[3].__abs__().max() - 1.0  # the largest magnitude negative
    x[4] *= 1e-3
    x[5] = np.round(x[5] * 4) / 4   # values on quarter steps: rounding ties
    x.reshape(-1).tofile(os.path.join(out, "quantize.f32"))
    for qt in (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1):
        q = gguf.quants.quantize(x, qt)
        np.asarray(q, dtype=np.uint8).reshape(-1).tofile(os.path.join(out, qt.name.lower() + ".quantized"))


def file(out):
    path = os.path.join(out, "oracle.gguf")
    w = gguf.GGUFWriter(path, arch="llama")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -32000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float32("t.f32", 0.25)
    w.add_float64("t.f64", 1e-300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo ✓")
    w.add_array("t.arr_str", ["a", "", "ß"])
    w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_f32", [0.5, -1.5])
    rng = np.random.default_rng(7)
    tensors = {}
    a = rng.standard_normal((3, 5)).astype(np.float32)
    w.add_tensor("a.f32", a)
    tensors["a.f32"] = {"type": "f32", "shape": [3, 5], "values": a.reshape(-1).tolist()}
    b = rng.standard_normal((4, 8)).astype(np.float16)
    w.add_tensor("b.f16", b)
    tensors["b.f16"] = {"type": "f16", "shape": [4, 8], "values": b.astype(np.float32).reshape(-1).tolist()}
    c = rng.standard_normal((2, 64)).astype(np.float32)
    cq = gguf.quants.quantize(c, Q.Q8_0)
    w.add_tensor("c.q8_0", cq, raw_shape=cq.shape, raw_dtype=Q.Q8_0)
    tensors["c.q8_0"] = {"type": "q8_0", "shape": [2, 64],
                         "values": gguf.quants.dequantize(cq, Q.Q8_0).reshape(-1).tolist()}
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(os.path.join(out, "oracle.json"), "w") as f:
        json.dump({"tensors": tensors}, f)


if __name__ == "__main__":
    {"blocks": blocks, "file": file, "quantize": quantize}[sys.argv[1]](sys.argv[2])
