#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/<target>/ (small valid inputs the fuzzers mutate).

The .bin seeds are pickled by CPython's own pickler (protocol 2) against stand-in `torch` modules, so their opcode
stream is what torch.save emits for a state dict (globals, persistent ids, memo, OrderedDict + BUILD), without
needing torch installed. Run: python3 fuzz/make_seeds.py
"""
import collections
import io
import json
import os
import pickle
import struct
import sys
import types
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


def fake_torch():
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*args):
        raise RuntimeError("stand-in")

    def _rebuild_parameter(*args):
        raise RuntimeError("stand-in")

    for f in (_rebuild_tensor_v2, _rebuild_parameter):
        f.__module__, f.__qualname__ = "torch._utils", f.__name__
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    utils._rebuild_parameter = _rebuild_parameter
    torch._utils = utils
    for name in ["FloatStorage", "HalfStorage", "BFloat16Storage", "LongStorage"]:
        cls = type(name, (), {"__module__": "torch", "__qualname__": name})
        setattr(torch, name, cls)
    sys.modules["torch"] = torch
    sys.modules["torch._utils"] = utils
    return torch


torch = fake_torch()


class Storage:
    def __init__(self, cls, key, numel):
        self.cls, self.key, self.numel = cls, key, numel


class Tensor:
    def __init__(self, storage, offset, size, stride, parameter=False):
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())
        self.parameter = parameter

    def __reduce__(self):
        inner = TensorInner(self.args)
        if self.parameter:
            return (torch._utils._rebuild_parameter, (inner, False, collections.OrderedDict()))
        return inner.__reduce__()


class TensorInner:
    def __init__(self, args):
        self.args = args

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.cls, obj.key, "cpu", obj.numel)
        return None


def state_dict_pickle():
    s0 = Storage(torch.FloatStorage, "0", 6)
    s1 = Storage(torch.HalfStorage, "1", 4)
    sd = collections.OrderedDict()
    sd["embed.weight"] = Tensor(s0, 0, (2, 3), (3, 1))
    sd["lm_head.weight"] = Tensor(s0, 0, (2, 3), (3, 1))  # tied
    sd["proj.weight"] = Tensor(s1, 0, (2, 2), (1, 2), parameter=True)  # transposed
    sd._metadata = collections.OrderedDict([("", {"version": 1})])
    buf = io.BytesIO()
    TorchPickler(buf, protocol=2).dump(sd)
    return buf.getvalue()


def torch_bin(pkl):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/data/0", struct.pack("<6f", 1, 2, 3, 4, 5, 6))
        z.writestr("archive/data/1", struct.pack("<4H", 0x3C00, 0x4000, 0x4200, 0x4400))
        z.writestr("archive/version", "3\n")
    return buf.getvalue()


def safetensors():
    header = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [8, 12]},
        "c": {"dtype": "I64", "shape": [], "data_offsets": [12, 20]},
    }
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + bytes(range(20))


def gguf():
    """A small GGUF v3: string, u32, bool and string-array metadata; an f32 [2, 3] and a q8_0 [32] tensor."""
    def gstr(t):
        b = t.encode()
        return struct.pack("<Q", len(b)) + b

    kv = gstr("general.architecture") + struct.pack("<I", 8) + gstr("llama")
    kv += gstr("llama.block_count") + struct.pack("<II", 4, 2)
    kv += gstr("t.flag") + struct.pack("<IB", 7, 1)
    kv += gstr("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2) + gstr("a") + gstr("b")
    q8 = struct.pack("<H", 0x3400) + bytes((i - 16) & 0xFF for i in range(32))  # d = 0.25
    infos = gstr("w") + struct.pack("<IQQIQ", 2, 3, 2, 0, 0)
    infos += gstr("q") + struct.pack("<IQIQ", 1, 32, 8, 32)
    head = b"GGUF" + struct.pack("<IQQ", 3, 2, 4) + kv + infos
    head += bytes((32 - len(head) % 32) % 32)
    data = struct.pack("<6f", 1, 2, 3, 4, 5, 6) + bytes(8) + q8
    return head + data


def pipeline_messages():
    """rank 0's commands to a follower (models/pipeline_protocol.h): start a sequence, a forward over it, a crop, the
    end — each message a u16 length and its bytes; a tensor is a header (dtype, dims, 8 dims) then its bytes."""
    magic = 0x66657272797032

    def msg(b):
        return struct.pack("<H", len(b)) + b

    def command(op, a=0, b=0, c=0):
        return msg(struct.pack("<5q", magic, op, a, b, c))

    def tensor_i64(values, shape):
        i64 = 10  # DType::I64
        header = struct.pack("<2q", i64, len(shape)) + struct.pack("<8q", *(list(shape) + [0] * (8 - len(shape))))
        return msg(header) + msg(struct.pack(f"<{len(values)}q", *values))

    out = command(1, 0, 0, 16) + tensor_i64([5, 17, 3], [3])
    out += command(2, 1, 1, 0) + tensor_i64([0, 3], [1, 2]) + tensor_i64([5, 17, 3], [3])
    out += command(3, 0, 2) + command(4, 0) + command(5)
    return out


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def main():
    pkl = state_dict_pickle()
    write("fuzz_torch_pickle", "state_dict.pkl", pkl)
    write("fuzz_torch_bin", "state_dict.bin", torch_bin(pkl))
    write("fuzz_zip_directory", "state_dict.bin", torch_bin(pkl))
    write("fuzz_safetensors_header", "small.safetensors", safetensors())
    write("fuzz_gguf", "small.gguf", gguf())
    write("fuzz_pipeline_messages", "start_forward_crop_end.bin", pipeline_messages())
    write("fuzz_checkpoint_index", "index.json", json.dumps(
        {"metadata": {"total_size": 20},
         "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}},
        indent=2).encode())
    write("fuzz_offload_index", "index.json", json.dumps(
        {"w": {"dtype": "bfloat16", "shape": [2, 3]}, "s": {"dtype": "float32", "shape": []},
         "t": {"safetensors_file": "model.safetensors", "weight_name": "x", "dtype": "float16"},
         "g": {"data_file": "model.gguf", "data_offset": 96, "dtype": "q4_k", "shape": [2, 256]}},
        indent=2).encode())


if __name__ == "__main__":
    main()
