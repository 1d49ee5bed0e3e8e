"""Accelerate's device-map plans for ferry to match (tests/big_modeling/device_map_oracle_test.cc).

For many seeded random module trees, budgets, dtypes and options, this script builds the tree on PyTorch's meta
device and asks Accelerate itself for the plan: infer_auto_device_map directly, or a device_map mode resolved exactly
as load_checkpoint_and_dispatch does ("auto", "balanced", "balanced_low_0", "sequential"). It prints one JSON
document on stdout: every case with its tree (a spec the C++ test builds the same tree from), its options, and
Accelerate's answer. The C++ test plans the same trees with ferry and compares.

Where ferry departs from Accelerate on purpose, the case is flagged here so the C++ test can name it instead of
comparing plans:
  - "drops_buffers": a split left some tensor without a device (Accelerate drops the direct buffers of modules it
    splits, #3956/#4014; ferry keeps them, so its later placements can differ);
  - "substring_tie": a tied parameter is "inside" a module by Accelerate's substring test but not by whole dotted
    components ("0.1.weight" is "in" module "1"); ferry uses components;
  - "low_zero_ids": balanced_low_0 where the GPUs with memory are not exactly 0..n-1: Accelerate sums the budgets
    of ids 1..n-1 (missing some GPUs, or raising KeyError); ferry sums every GPU with memory but the first;
  - "raises": Accelerate raised (the message is kept); ferry must still return a complete plan.

Accelerate's order of tied-parameter groups depends on PYTHONHASHSEED; this script sorts them, as ferry does.

Tree spec: {"type": class name, "params": [[name, shape, dtype]], "buffers": [[name, shape, dtype, persistent]],
"children": [[name, spec]]}; "ties": [[dst, src]] makes tensor dst the same parameter as src. dtypes are
safetensors names (F32, F16, BF16, I64, BOOL). Bool tensors always have a multiple of 8 elements, so Accelerate's
fractional 1/8-byte sizes stay whole (ferry rounds per tensor).

Usage: .venv/bin/python tests/reference/plan_oracle.py [--cases N] [--seed S]   (exit status 3: no torch/accelerate)
"""

import argparse
import json
import logging
import os
import random
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

try:
    import torch
    from accelerate.utils import modeling as acc
except ImportError as e:  # the venv is missing or half-built
    print(f"plan_oracle: cannot import torch/accelerate: {e}", file=sys.stderr)
    sys.exit(3)

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64, "BOOL": torch.bool}
TARGETS = {None: None, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
MODES = ("auto", "balanced", "balanced_low_0", "sequential")

_classes = {}

# Accelerate's find_tied_parameters builds its groups by iterating a set of names, so the order of the groups (not
# of the names inside one) follows PYTHONHASHSEED, and with several tied groups its plans change from run to run.
# ferry sorts the groups; sorting them here picks that one of Accelerate's possible orders, every time.
_find_tied_parameters = acc.find_tied_parameters
acc.find_tied_parameters = lambda model, **kw: sorted(_find_tied_parameters(model, **kw))


def module_class(name):
    """A distinct nn.Module subclass per type name, so no_split_module_classes can match __class__.__name__."""
    if name not in _classes:
        _classes[name] = type(name, (torch.nn.Module,), {})
    return _classes[name]


def build(spec):
    m = module_class(spec["type"])()
    for name, shape, dtype in spec.get("params", []):
        m.register_parameter(name, torch.nn.Parameter(torch.empty(shape, dtype=DTYPES[dtype], device="meta"),
                                                      requires_grad=False))
    for name, child in spec.get("children", []):
        m.add_module(name, build(child))
    for name, shape, dtype, persistent in spec.get("buffers", []):
        m.register_buffer(name, torch.empty(shape, dtype=DTYPES[dtype], device="meta"), persistent=persistent)
    return m


def build_model(case):
    model = build(case["tree"])
    for dst, src in case.get("ties", []):
        owner_name, _, local = dst.rpartition(".")
        owner = model.get_submodule(owner_name)
        setattr(owner, local, model.get_parameter(src))
    return model


# ---- random trees ------------------------------------------------------------------------------------------------


class TreeMaker:
    """Random module trees shaped like real models: embeddings, blocks of attention/MLP/norm, lists of layers."""

    def __init__(self, rng):
        self.rng = rng
        self.dtype = rng.choice(["F32", "F32", "F16", "BF16"])

    def dim(self):
        return self.rng.choice([2, 3, 4, 6, 8, 12, 16, 24, 32])

    def tensor_dtype(self):
        return self.dtype if self.rng.random() < 0.85 else self.rng.choice(["F32", "F16", "BF16"])

    def linear(self):
        o, i = self.dim(), self.dim()
        params = [["weight", [o, i], self.tensor_dtype()]]
        if self.rng.random() < 0.6:
            params.append(["bias", [o], self.tensor_dtype()])
        return {"type": "Linear", "params": params}

    def norm(self):
        d = self.dim()
        params = [["weight", [d], self.tensor_dtype()]]
        if self.rng.random() < 0.5:
            params.append(["bias", [d], self.tensor_dtype()])
        return {"type": self.rng.choice(["LayerNorm", "RMSNorm"]), "params": params}

    def batchnorm(self):
        d = self.dim()
        return {"type": "BatchNorm1d", "params": [["weight", [d], "F32"], ["bias", [d], "F32"]],
                "buffers": [["running_mean", [d], "F32", True], ["running_var", [d], "F32", True],
                            ["num_batches_tracked", [], "I64", True]]}

    def embedding(self):
        return {"type": "Embedding", "params": [["weight", [self.dim() * 4, self.dim()], self.tensor_dtype()]]}

    def leaf(self):
        r = self.rng.random()
        if r < 0.55:
            return self.linear()
        if r < 0.75:
            return self.norm()
        if r < 0.87:
            return self.batchnorm()
        return self.embedding()

    def maybe_direct_tensors(self, spec):
        # Containers with their own tensors: rotary inv_freq buffers, masks, scales. These are what Accelerate drops
        # when it splits the container.
        if self.rng.random() < 0.1:
            spec.setdefault("buffers", []).append(
                ["inv_freq", [self.dim()], "F32", self.rng.random() < 0.5])
        if self.rng.random() < 0.05:
            spec.setdefault("buffers", []).append(["mask", [8 * self.rng.randint(1, 4)], "BOOL", True])
        if self.rng.random() < 0.12:
            spec.setdefault("params", []).append(["scale", [self.dim()], self.tensor_dtype()])
        return spec

    def block(self, depth):
        kind = self.rng.random()
        if depth <= 0 or kind < 0.25:
            return self.leaf()
        if kind < 0.55:  # a decoder-like block with named parts
            names = ["self_attn", "mlp", "input_layernorm", "post_attention_layernorm"]
            children = [[n, self.block(depth - 1) if n in ("self_attn", "mlp") else self.norm()]
                        for n in names[: self.rng.randint(2, 4)]]
            return self.maybe_direct_tensors({"type": self.rng.choice(["DecoderLayer", "Block"]),
                                              "children": children})
        if kind < 0.8:  # a numbered list, sometimes long enough for "1" and "10"
            n = self.rng.choice([2, 3, 4, 12])
            one = self.rng.random() < 0.6  # identical layers, as in real models
            proto = self.block(depth - 1)
            children = [[str(i), json.loads(json.dumps(proto)) if one else self.block(depth - 1)] for i in range(n)]
            return self.maybe_direct_tensors({"type": self.rng.choice(["ModuleList", "Sequential"]),
                                              "children": children})
        children = [[f"part{i}", self.block(depth - 1)] for i in range(self.rng.randint(1, 3))]
        return self.maybe_direct_tensors({"type": "Wrapper", "children": children})

    def model(self):
        children = []
        if self.rng.random() < 0.5:
            children.append(["embed_tokens", self.embedding()])
        children.append(["layers", {"type": "ModuleList",
                                    "children": [[str(i), self.block(2)] for i in range(self.rng.randint(1, 12))]}])
        if self.rng.random() < 0.5:
            children.append(["norm", self.norm()])
        if self.rng.random() < 0.5:
            children.append(["lm_head", self.linear()])
        root = {"type": "Root", "children": children}
        if self.rng.random() < 0.1:
            root["params"] = [["root_scale", [self.dim()], self.dtype]]
        return self.maybe_direct_tensors(root) if self.rng.random() < 0.3 else root


def tensor_shapes(spec, prefix=""):
    out = {}
    for name, shape, dtype in spec.get("params", []):
        out[prefix + name] = (tuple(shape), dtype, True)
    for name, child in spec.get("children", []):
        out.update(tensor_shapes(child, prefix + name + "."))
    for name, shape, dtype, _ in spec.get("buffers", []):
        out[prefix + name] = (tuple(shape), dtype, False)
    return out


def random_ties(rng, spec):
    """Ties between parameters of equal shape and dtype: lm_head/embedding pairs, and sometimes three-way groups."""
    params = [(n, s) for n, s in tensor_shapes(spec).items() if s[2]]
    ties = []
    if rng.random() < 0.4:
        by_shape = {}
        for name, s in params:
            by_shape.setdefault(s, []).append(name)
        groups = [names for names in by_shape.values() if len(names) > 1]
        for names in rng.sample(groups, min(len(groups), rng.randint(1, 2))):
            members = rng.sample(names, min(len(names), rng.choice([2, 2, 3])))
            ties += [[dst, members[0]] for dst in members[1:]]
    return ties


def module_class_names(spec, out=None):
    out = set() if out is None else out
    for _, child in spec.get("children", []):
        if child.get("children"):
            out.add(child["type"])
        module_class_names(child, out)
    return out


def random_case(rng, index):
    tree = TreeMaker(rng).model()
    case = {"name": f"random-{index}", "tree": tree, "ties": random_ties(rng, tree)}
    model = build_model(case)
    target = rng.choice([None, None, "F16", "BF16", "F32"])
    total = acc.compute_module_sizes(model, dtype=TARGETS[target])[""]
    budget = {}
    n_gpus = rng.choice([0, 1, 1, 2, 2, 3])
    first = 0 if rng.random() < 0.85 else rng.randint(1, 2)
    for g in range(n_gpus):
        budget[str(first + g)] = int(total * rng.uniform(0.0, 0.9)) if rng.random() < 0.95 else 0
    if rng.random() < 0.75 or not budget:
        budget["cpu"] = int(total * rng.uniform(0.05, 1.2))
    containers = sorted(module_class_names(tree))
    no_split = rng.sample(containers, rng.randint(0, min(2, len(containers)))) if containers else []
    mode = rng.choice(["infer", "infer", "infer"] + list(MODES))
    case.update({"max_memory": budget, "no_split_module_classes": no_split, "dtype": target, "mode": mode,
                 "offload_buffers": rng.random() < 0.3, "fallback_allocation": False, "clean_result": True,
                 "special_dtypes": {}})
    if mode == "infer":
        case["fallback_allocation"] = rng.random() < 0.3
        case["clean_result"] = rng.random() < 0.85
        if rng.random() < 0.2:
            names = [n for n, s in tensor_shapes(tree).items() if s[1] != "I64" and s[1] != "BOOL"]
            case["special_dtypes"] = {n: rng.choice(["F32", "F16"]) for n in rng.sample(names, min(3, len(names)))}
    return case


# ---- fixed cases (Accelerate's own tests, plus ferry's) ----------------------------------------------------------


def linear_spec(i, o, bias=True):
    params = [["weight", [o, i], "F32"]] + ([["bias", [o], "F32"]] if bias else [])
    return {"type": "Linear", "params": params}


def model_for_test():
    return {"type": "ModelForTest", "children": [
        ["linear1", linear_spec(3, 4)],
        ["batchnorm", {"type": "BatchNorm1d", "params": [["weight", [4], "F32"], ["bias", [4], "F32"]],
                       "buffers": [["running_mean", [4], "F32", True], ["running_var", [4], "F32", True],
                                   ["num_batches_tracked", [], "I64", True]]}],
        ["linear2", linear_spec(4, 5)]]}


def fixed_cases():
    def case(name, tree, budget, **kw):
        c = {"name": name, "tree": tree, "ties": [], "max_memory": budget, "no_split_module_classes": [],
             "dtype": None, "mode": "infer", "offload_buffers": False, "fallback_allocation": False,
             "clean_result": True, "special_dtypes": {}}
        c.update(kw)
        return c

    three = {"type": "Sequential", "children": [[str(i), model_for_test()] for i in range(3)]}
    wrapped = {"type": "Sequential", "children": [["module", {"type": "Sequential", "children": [
        ["linear1", linear_spec(10, 4)], ["linear2", linear_spec(4, 4)], ["linear3", linear_spec(4, 8)]]}]]}
    rotary = {"type": "Root", "children": [
        ["block", {"type": "Block", "children": [["a", linear_spec(8, 8)], ["b", linear_spec(8, 8)]],
                   "buffers": [["inv_freq", [16], "F32", False]]}],
        ["head", linear_spec(8, 8)]]}
    return [
        case("model_for_test", model_for_test(), {"0": 200, "1": 200}),
        case("model_for_test_three_gpus", model_for_test(), {"0": 200, "1": 172, "2": 200}),
        case("model_for_test_tied", model_for_test(), {"0": 200, "1": 200}, ties=[["linear1.weight", "linear2.weight"]]),
        case("three_models", three, {"0": 500, "1": 500}),
        case("three_models_no_split", three, {"0": 500, "1": 500}, no_split_module_classes=["ModelForTest"]),
        case("fallback_off", wrapped, {"0": 256}),
        case("fallback_on", wrapped, {"0": 256}, fallback_allocation=True),
        case("cpu_only", model_for_test(), {"cpu": 200}),
        case("split_with_buffers", rotary, {"0": 900, "cpu": 2000}),
        case("balanced", model_for_test(), {"0": 300, "1": 300}, mode="balanced"),
        case("balanced_low_0", three, {"0": 1000, "1": 1000, "2": 1000}, mode="balanced_low_0"),
        case("sequential", three, {"0": 1000, "1": 1000}, mode="sequential", no_split_module_classes=["ModelForTest"]),
        case("auto", three, {"0": 1000, "1": 1000}, mode="auto", no_split_module_classes=["ModelForTest"]),
    ]


# ---- running Accelerate ------------------------------------------------------------------------------------------


def budget_arg(budget):
    return {int(k) if k.isdigit() else k: v for k, v in budget.items()}


def plain(device_map):
    return {k: (v if isinstance(v, (int, str)) else str(v)) for k, v in device_map.items()}


def covers(device_map, name):
    return any(k == "" or name == k or name.startswith(k + ".") for k in device_map)


def substring_tie_quirk(model, ties):
    tied = [n for group in acc.find_tied_parameters(model) for n in group]
    # Queue items are modules and tensors (a split queues a module's own parameters and buffers).
    names = [n for n, _ in model.named_modules(remove_duplicate=False)]
    names += [n for n, _ in model.named_parameters(remove_duplicate=False)]
    names += [n for n, _ in model.named_buffers(remove_duplicate=False)]
    for n in names:
        if not n:
            continue
        for k in tied:
            if (n + "." in k + ".") != (k == n or k.startswith(n + ".")):
                return True
    return False


def run(case):
    model = build_model(case)
    out = {"flags": []}
    if substring_tie_quirk(model, case["ties"]):
        out["flags"].append("substring_tie")
    gpus = sorted(int(k) for k, v in case["max_memory"].items() if k.isdigit() and v > 0)
    if case["mode"] == "balanced_low_0" and len(gpus) > 1 and gpus != list(range(len(gpus))):
        out["flags"].append("low_zero_ids")
    kwargs = {"no_split_module_classes": case["no_split_module_classes"], "dtype": TARGETS[case["dtype"]]}
    budget = budget_arg(case["max_memory"])
    try:
        if case["mode"] == "infer":
            special = {k: DTYPES[v] for k, v in case["special_dtypes"].items()} or None
            extra = {"special_dtypes": special, "offload_buffers": case["offload_buffers"],
                     "fallback_allocation": case["fallback_allocation"]}
        else:
            # load_checkpoint_and_dispatch's resolution of a mode string.
            if case["mode"] != "sequential":
                budget = acc.get_balanced_memory(model, max_memory=dict(budget), low_zero=case["mode"] == "balanced_low_0",
                                                 **kwargs)
                out["balanced"] = {str(k): v for k, v in budget.items()}
            extra = {"offload_buffers": case["offload_buffers"]}
        out["device_map"] = plain(acc.infer_auto_device_map(model, max_memory=dict(budget), clean_result=case["clean_result"],
                                                            **kwargs, **extra))
        raw = acc.infer_auto_device_map(model, max_memory=dict(budget), clean_result=False, **kwargs, **extra)
    except Exception as e:  # noqa: BLE001 - any failure of Accelerate is recorded, not fatal
        out["raises"] = f"{type(e).__name__}: {e}"
        out["flags"].append("raises")
        return out
    tensors = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    if any(not covers(raw, n) for n in tensors):
        out["flags"].append("drops_buffers")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300, help="number of random cases (plus the fixed ones)")
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    rng = random.Random(args.seed)
    cases = fixed_cases() + [random_case(rng, i) for i in range(args.cases)]
    for case in cases:
        case["accelerate"] = run(case)
    json.dump({"accelerate_version": __import__("accelerate").__version__, "torch_version": torch.__version__,
               "seed": args.seed, "cases": cases}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
