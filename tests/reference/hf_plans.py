"""Accelerate's infer_auto_device_map for causal-LM folders, built on meta from their config.json as transformers'
from_pretrained does (tied weights tied), with the family's _no_split_modules, at five cpu budgets (fractions of the
model's size) and a disk: the oracle for ferry's plans of the same folders (tests/models/hf_reference_test.cc).

    hf_plans.py OUT.json FOLDER [FOLDER ...]

OUT.json: {folder name: [{"cpu": bytes, "no_split": [...], "device_map": {module: device}}, ...]}.
"""
import json
import os
import sys

for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(var, "1")

from accelerate import infer_auto_device_map, init_empty_weights  # noqa: E402
from accelerate.utils import compute_module_sizes  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

# Modules that transformers 5 names otherwise than the checkpoints do (it renames their keys on load and back on
# save: conversion_mapping.py), by model_type: ferry keeps the checkpoints' names, so the plans are compared in those.
CHECKPOINT_MODULE_NAMES = {"gpt_neox": {"lm_head": "embed_out"}}


def checkpoint_name(name, renames):
    for old, new in renames.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return name


def plans(folder):
    config = AutoConfig.from_pretrained(folder)
    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(config)
    model.tie_weights()
    no_split = list(model._no_split_modules or [])
    total = compute_module_sizes(model)[""]
    out = []
    for fraction in (0.15, 0.3, 0.5, 0.7, 0.9):
        budget = int(total * fraction)
        device_map = infer_auto_device_map(model, max_memory={"cpu": budget, "disk": 10**12},
                                           no_split_module_classes=no_split)
        renames = CHECKPOINT_MODULE_NAMES.get(config.model_type, {})
        out.append({"cpu": budget, "no_split": no_split,
                    "device_map": {checkpoint_name(k, renames): str(v) for k, v in device_map.items()}})
    return out


def main():
    out, folders = sys.argv[1], sys.argv[2:]
    result = {os.path.basename(os.path.normpath(f)): plans(f) for f in folders}
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
