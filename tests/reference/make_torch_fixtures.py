#!/usr/bin/env python3
"""Real PyTorch / safetensors / Accelerate files for ferry's io tests (tests/io/torch_reference_test.cc).

    make_torch_fixtures.py make DIR    writes fixtures into DIR with torch.save, safetensors and Accelerate, plus
                                       DIR/expected.json and the expected contiguous bytes of every tensor
    make_torch_fixtures.py check DIR   reads what ferry wrote into DIR (ferry.safetensors, ferry_offload/) with
                                       safetensors and Accelerate and compares it bit for bit with the fixtures;
                                       exit status 0 when everything matches

Run with the reference venv (scripts/venv): .venv/bin/python tests/reference/make_torch_fixtures.py make /tmp/x
Everything is deterministic (torch.manual_seed); nothing is downloaded.
"""
import json
import os
import sys

import torch

ST_NAMES = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int8: "I8", torch.uint8: "U8", torch.int16: "I16", torch.int32: "I32", torch.int64: "I64",
    torch.bool: "BOOL",
}
FP8 = [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)]
ST_NAMES.update({d: n for d, n in zip(FP8, ["F8_E4M3", "F8_E5M2"])})


class Tiny(torch.nn.Module):
    """Embedding tied to the output head, a biased linear, a norm and two buffers (int64, bool)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(11, 6)
        self.proj = torch.nn.Linear(6, 5)
        self.norm = torch.nn.LayerNorm(5)
        self.lm_head = torch.nn.Linear(6, 11, bias=False)
        self.lm_head.weight = self.embed.weight
        self.register_buffer("position_ids", torch.arange(7, dtype=torch.int64).unsqueeze(0))
        self.register_buffer("mask", torch.tensor([True, False, True]))


def raw_bytes(t):
    """The tensor's elements in C order, as bytes."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def dtypes_dict():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 4, generator=g)
    sd = {
        "f32": x, "f16": x.half(), "bf16": x.bfloat16(), "f64": x.double(),
        "i8": (x * 20).to(torch.int8), "u8": (x * 20).abs().to(torch.uint8), "i16": (x * 1000).to(torch.int16),
        "i32": (x * 1e6).to(torch.int32), "i64": (x * 1e12).to(torch.int64), "bool": x > 0,
        "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3),
    }
    for d in FP8:
        sd[str(d).replace("torch.", "")] = x.to(d)
    return sd


def views_dict():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    v = torch.tensor([1.0, -2.0, 3.0, -4.0])
    cube = torch.arange(24, dtype=torch.float16).reshape(2, 3, 4)
    return {
        "base": base,                    # contiguous, shares its storage with every view below
        "rows": base[1:3],               # contiguous view at an offset
        "t": base.t(),                   # transposed
        "col": base[:, 1],               # strided
        "expand": v.expand(3, 4),        # stride 0
        "perm": cube.permute(2, 0, 1),   # 3-d permutation
        "narrow": cube[:, 1:, ::2],      # non-unit step
    }


def manifest_for(sd, out, tag):
    os.makedirs(os.path.join(out, "expected", tag), exist_ok=True)
    entries = {}
    storages = {}
    for name, t in sd.items():
        raw = os.path.join("expected", tag, name + ".raw")
        with open(os.path.join(out, raw), "wb") as f:
            f.write(raw_bytes(t))
        ptr = t.untyped_storage().data_ptr()
        storages.setdefault(ptr, len(storages))
        entries[name] = {"dtype": ST_NAMES[t.dtype], "shape": list(t.shape), "raw": raw,
                         "storage": storages[ptr], "contiguous": t.is_contiguous()}
    return entries


def make(out):
    torch.manual_seed(0)
    os.makedirs(out, exist_ok=True)
    manifest = {"torch": torch.__version__, "files": {}}

    model = Tiny()
    plain = model.state_dict()
    torch.save(plain, os.path.join(out, "plain.bin"))
    manifest["files"]["plain.bin"] = manifest_for(plain, out, "plain")

    dt = dtypes_dict()
    torch.save(dt, os.path.join(out, "dtypes.bin"))
    manifest["files"]["dtypes.bin"] = manifest_for(dt, out, "dtypes")

    views = views_dict()
    torch.save(views, os.path.join(out, "views.bin"))
    manifest["files"]["views.bin"] = manifest_for(views, out, "views")

    torch.save(plain, os.path.join(out, "legacy.bin"), _use_new_zipfile_serialization=False)
    manifest["legacy"] = "legacy.bin"

    try:
        from safetensors.torch import save_file

        st = {k: v for k, v in dt.items()}
        save_file(st, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
        manifest["files"]["model.safetensors"] = manifest_for(st, out, "safetensors")
    except ImportError:
        pass

    try:
        from accelerate.utils import offload_state_dict

        # numpy has no fp8 and cannot memmap an empty file, so Accelerate cannot offload those.
        off = {k: v for k, v in dt.items() if v.dtype not in FP8 and v.numel() > 0}
        offload_state_dict(os.path.join(out, "accelerate_offload"), off)
        manifest["accelerate_offload"] = manifest_for(off, out, "offload")
    except ImportError:
        pass

    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"wrote fixtures with torch {torch.__version__} to {out}")


def same(a, b):
    return a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and raw_bytes(a) == raw_bytes(b)


def check(folder):
    problems = []
    plain = torch.load(os.path.join(folder, "plain.bin"), weights_only=True)
    dt = torch.load(os.path.join(folder, "dtypes.bin"), weights_only=True)

    from safetensors.torch import load_file

    written = load_file(os.path.join(folder, "ferry.safetensors"))
    if set(written) != set(plain):
        problems.append(f"ferry.safetensors names {sorted(written)} != {sorted(plain)}")
    for name, t in plain.items():
        if name in written and not same(written[name], t):
            problems.append(f"ferry.safetensors: {name} differs")

    off = os.path.join(folder, "ferry_offload")
    with open(os.path.join(off, "index.json")) as f:
        index = json.load(f)
    if set(index) != set(dt):
        problems.append(f"ferry_offload names {sorted(index)} != {sorted(dt)}")
    try:
        from accelerate.utils import load_offloaded_weight
    except ImportError:
        load_offloaded_weight = None
    for name, info in index.items():
        want = dt.get(name)
        if want is None:
            continue
        path = os.path.join(off, name + ".dat")
        if want.dtype in FP8 or load_offloaded_weight is None or want.numel() == 0:
            data = bytearray(open(path, "rb").read())
            got = (torch.frombuffer(data, dtype=getattr(torch, info["dtype"])) if data
                   else torch.empty(0, dtype=getattr(torch, info["dtype"])))
            got = got.reshape(info["shape"])
        else:
            got = load_offloaded_weight(path, info)  # Accelerate itself reads ferry's folder
        if not same(got, want):
            problems.append(f"ferry_offload: {name} differs ({got.dtype} {tuple(got.shape)})")
    for p in problems:
        print(p)
    print("check: OK" if not problems else f"check: {len(problems)} problem(s)")
    return 0 if not problems else 1


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("make", "check"):
        print(__doc__)
        sys.exit(2)
    if sys.argv[1] == "make":
        make(sys.argv[2])
        sys.exit(0)
    sys.exit(check(sys.argv[2]))
