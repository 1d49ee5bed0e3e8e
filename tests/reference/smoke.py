"""Smoke test of the Python reference environment (the venv made by scripts/venv).

The golden outputs and device-map plans that ferry is compared against are produced by Hugging Face transformers and
Accelerate running in that venv. This script checks, on the CPU and without any network, that every piece those
reference scripts use works: the imports, torch.save/torch.load and safetensors round trips (including the f8 dtypes
of DESIGN.md), a forward pass of each first-wave architecture built from a tiny random config, Accelerate's
infer_auto_device_map on a meta-device model, and training a tiny BPE tokenizer. Each check compares against a value
it can get wrong, so a broken install fails here rather than in a golden-file generator.

Usage: .venv/bin/python tests/reference/smoke.py   (prints one line per check; exit status 0 when all pass)
"""

import json
import os
import sys
import tempfile

# The venv sets these through a .pth file (see tests/reference/README.md); they are set here too so that the script
# stays offline when run by another interpreter. PRESET records what the interpreter itself provided.
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
PRESET = {var: os.environ.get(var) for var in OFFLINE_VARS}
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import accelerate  # noqa: E402
import safetensors  # noqa: E402
import safetensors.torch  # noqa: E402
import tokenizers  # noqa: E402
import transformers  # noqa: E402

FAILURES = []


def check(name, fn):
    """Runs one check; records and reports a failure instead of stopping at the first one."""
    try:
        detail = fn()
        print(f"ok   {name}" + (f": {detail}" if detail else ""))
    except Exception as exc:  # noqa: BLE001 - every failure is reported, then the exit status says it failed
        FAILURES.append(name)
        print(f"FAIL {name}: {type(exc).__name__}: {exc}")


def versions():
    return ", ".join(
        f"{m.__name__} {m.__version__}" for m in (torch, transformers, accelerate, safetensors, tokenizers, np)
    )


def offline_env():
    in_ferry_venv = os.path.exists(os.path.join(sys.prefix, "ferry-venv.stamp"))
    for var in OFFLINE_VARS:
        assert os.environ.get(var) == "1", f"{var} is {os.environ.get(var)!r}, expected '1'"
        if in_ferry_venv:
            assert PRESET[var] is not None, f"the venv did not set {var} (is ferry_offline.pth missing?)"
    import huggingface_hub.constants as hub

    assert hub.HF_HUB_OFFLINE, "huggingface_hub does not consider itself offline"
    source = "set by the venv" if in_ferry_venv else "set by this script"
    return f"HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ({source})"


def cpu_ops():
    torch.manual_seed(0)
    a = torch.randn(8, 16)
    b = torch.randn(16, 4)
    got = (a @ b).numpy()
    want = a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5), "float32 matmul disagrees with numpy float64"
    bf = (a.to(torch.bfloat16) @ b.to(torch.bfloat16)).float().numpy()
    assert np.allclose(bf, want, rtol=0.05, atol=0.1), "bf16 matmul far from the float64 result"
    return f"threads={torch.get_num_threads()} cuda_available={torch.cuda.is_available()}"


def torch_save_load():
    torch.manual_seed(1)
    sd = {
        "linear.weight": torch.randn(3, 5),
        "linear.bias": torch.arange(3, dtype=torch.float16),
        "emb.weight": torch.randn(4, 2).to(torch.bfloat16),
        "steps": torch.tensor([7], dtype=torch.int64),
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pytorch_model.bin")
        torch.save(sd, path)
        back = torch.load(path, map_location="cpu", weights_only=True)
    assert back.keys() == sd.keys(), f"keys differ: {sorted(back)}"
    for k, v in sd.items():
        assert back[k].dtype == v.dtype and torch.equal(back[k], v), f"{k} changed in the round trip"
    return f"{len(sd)} tensors"


def safetensors_round_trip():
    sd = {
        "f32": torch.randn(2, 3),
        "bf16": torch.randn(4).to(torch.bfloat16),
        "f8_e4m3": torch.tensor([0.5, -1.0, 448.0]).to(torch.float8_e4m3fn),
        "f8_e5m2": torch.tensor([0.25, 2.0]).to(torch.float8_e5m2),
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.safetensors")
        safetensors.torch.save_file(sd, path, metadata={"format": "pt"})
        back = safetensors.torch.load_file(path)
        with open(path, "rb") as f:
            header_len = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(header_len))
    for k, v in sd.items():
        assert back[k].dtype == v.dtype, f"{k}: dtype {back[k].dtype} != {v.dtype}"
        assert torch.equal(back[k].view(torch.uint8), v.view(torch.uint8)), f"{k}: bytes changed"
    dtypes = {k: header[k]["dtype"] for k in sd}
    assert dtypes == {"f32": "F32", "bf16": "BF16", "f8_e4m3": "F8_E4M3", "f8_e5m2": "F8_E5M2"}, dtypes
    return "F32 BF16 F8_E4M3 F8_E5M2"


TINY = dict(vocab_size=64, hidden_size=32, num_attention_heads=4, max_position_embeddings=64)


def tiny_models():
    """(name, model class name, config factory) for each first-wave architecture, all tiny and random."""
    t = transformers
    llama_rope = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32,
    }
    common = dict(TINY, intermediate_size=64, num_hidden_layers=2, num_key_value_heads=2)
    gpt = dict(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0)
    return [
        ("llama(rope llama3)", "LlamaForCausalLM",
         lambda: t.LlamaConfig(**common, rope_scaling=llama_rope, rope_theta=500000.0, tie_word_embeddings=False)),
        ("mistral", "MistralForCausalLM", lambda: t.MistralConfig(**common, sliding_window=16)),
        ("qwen2", "Qwen2ForCausalLM", lambda: t.Qwen2Config(**common, tie_word_embeddings=True)),
        ("gpt2", "GPT2LMHeadModel", lambda: t.GPT2Config(**gpt)),
        ("gptj", "GPTJForCausalLM", lambda: t.GPTJConfig(**gpt, rotary_dim=4)),
    ]


def forward(cls, config):
    torch.manual_seed(0)
    model = cls(config).eval()
    ids = torch.tensor([[1, 5, 9, 2, 33, 7]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    return model, ids, logits


def model_check(name, cls_name, make_config):
    def run():
        cls = getattr(transformers, cls_name)
        config = make_config()
        model, ids, logits = forward(cls, config)
        assert logits.shape == (1, ids.shape[1], config.vocab_size), f"logits shape {tuple(logits.shape)}"
        assert torch.isfinite(logits).all(), "non-finite logits"
        _, _, again = forward(cls, config)
        assert torch.equal(logits, again), "same seed, different logits"
        # Causality: the logits of the first k tokens do not depend on later tokens.
        with torch.no_grad():
            prefix = model(input_ids=ids[:, :3]).logits
        assert torch.allclose(prefix, logits[:, :3], atol=1e-5), "prefix logits changed with later tokens"
        if name.startswith("llama"):
            rope_type = model.model.rotary_emb.rope_type
            assert rope_type == "llama3", f"rotary embedding is {rope_type!r}, not llama3"
        params = sum(p.numel() for p in model.parameters())
        return f"{params} parameters, logits {tuple(logits.shape)}"

    check(f"forward {name}", run)


def device_map():
    from accelerate import infer_auto_device_map, init_empty_weights
    from accelerate.utils import compute_module_sizes

    config = transformers.LlamaConfig(**TINY, intermediate_size=64, num_hidden_layers=4, num_key_value_heads=2)
    with init_empty_weights():
        model = transformers.LlamaForCausalLM(config)
    assert all(p.device.type == "meta" for p in model.parameters()), "init_empty_weights left real tensors"
    sizes = compute_module_sizes(model)
    layer = sizes["model.layers.0"]
    # Room on "cpu" for about two decoder layers, the rest must go to disk.
    budget = {"cpu": int(layer * 2.5), "disk": 10**12}
    dmap = infer_auto_device_map(model, max_memory=budget, no_split_module_classes=["LlamaDecoderLayer"])
    placed = set(dmap.values())
    assert placed == {"cpu", "disk"}, f"expected a cpu/disk split, got {dmap}"
    for name, _ in model.named_parameters():
        assert any(name == k or name.startswith(k + ".") or k == "" for k in dmap), f"{name} not in the map"
    on_cpu = sum(1 for k, v in dmap.items() if v == "cpu")
    return f"{len(dmap)} entries, {on_cpu} on cpu, total {sizes['']} bytes"


def bpe_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = ["the ferry carries big models across the river", "the river is wide", "models carry weights"] * 20
    tok.train_from_iterator(corpus, trainer=trainer)
    text = "the ferry carries models"
    enc = tok.encode(text)
    assert tok.decode(enc.ids) == text, f"round trip gave {tok.decode(enc.ids)!r}"
    assert len(enc.ids) < len(text), "BPE learnt no merges"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tokenizer.json")
        tok.save(path)
        assert Tokenizer.from_file(path).encode(text).ids == enc.ids, "tokenizer.json round trip changed ids"
    return f"vocab {tok.get_vocab_size()}, {len(enc.ids)} tokens for {len(text)} chars"


def main():
    print(f"python {sys.version.split()[0]} at {sys.prefix}")
    check("versions", versions)
    check("offline environment", offline_env)
    check("cpu ops", cpu_ops)
    check("torch.save/load", torch_save_load)
    check("safetensors", safetensors_round_trip)
    for name, cls_name, make_config in tiny_models():
        model_check(name, cls_name, make_config)
    check("accelerate infer_auto_device_map (meta)", device_map)
    check("tokenizers BPE", bpe_tokenizer)
    if FAILURES:
        print(f"smoke: {len(FAILURES)} check(s) failed: {', '.join(FAILURES)}")
        return 1
    print("smoke: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
