"""A Qwen3-30B-A3B-shaped mixture of experts with random bf16 weights, for scripts/bench-moe.

    bench_moe_make.py OUT_DIR [--layers N]

Qwen3-30B-A3B's shape (its config.json on the Hub): hidden 2048, 128 experts of width 768 with 8 routed per token
(top-k renormalised), 32 query heads and 4 KV heads of 128, vocabulary 151936, untied head — with N of its 48
layers (default 12). Written as transformers' save_pretrained writes Qwen3-MoE (config.json with model_type
qwen3_moe; per-expert tensors model.layers.L.mlp.experts.K.{gate,up,down}_proj.weight), one safetensors shard per
layer plus an index, one tensor at a time in memory. Weights are N(0, 1/fan_in) so activations stay O(1); norms 1.
Random weights route almost uniformly: the expert cache's hit rate on them is the worst case.
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file

CONFIG = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
    "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
    "norm_topk_prob": True, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
    "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "tie_word_embeddings": False, "decoder_sparse_step": 1, "mlp_only_layers": [], "use_sliding_window": False,
    "bos_token_id": 151643, "eos_token_id": 151645, "torch_dtype": "bfloat16",
}


def linear(out_features, in_features, g):
    return (torch.randn(out_features, in_features, generator=g) / in_features ** 0.5).to(torch.bfloat16)


def main():
    out = sys.argv[1]
    layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else 12
    os.makedirs(out, exist_ok=True)
    c = dict(CONFIG, num_hidden_layers=layers)
    h, e, w, hd = c["hidden_size"], c["num_experts"], c["moe_intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    g = torch.Generator().manual_seed(0)
    weight_map, total = {}, 0
    shards = layers + 1

    def write(tensors, index):
        nonlocal total
        name = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        save_file(tensors, os.path.join(out, name), metadata={"format": "pt"})
        for k, t in tensors.items():
            weight_map[k] = name
            total += t.numel() * t.element_size()

    def ones(n=None):
        return torch.ones(n or h, dtype=torch.bfloat16)
    write({"model.embed_tokens.weight": linear(c["vocab_size"], h, g) * h ** 0.5 / 4,
           "model.norm.weight": ones(), "lm_head.weight": linear(c["vocab_size"], h, g)}, 0)
    for layer in range(layers):
        p = f"model.layers.{layer}."
        t = {p + "input_layernorm.weight": ones(), p + "post_attention_layernorm.weight": ones(),
             p + "self_attn.q_proj.weight": linear(q, h, g), p + "self_attn.k_proj.weight": linear(kv, h, g),
             p + "self_attn.v_proj.weight": linear(kv, h, g), p + "self_attn.o_proj.weight": linear(h, q, g),
             p + "self_attn.q_norm.weight": ones(hd),
             p + "self_attn.k_norm.weight": ones(hd),
             p + "mlp.gate.weight": linear(e, h, g)}
        for k in range(e):
            x = p + f"mlp.experts.{k}."
            t[x + "gate_proj.weight"] = linear(w, h, g)
            t[x + "up_proj.weight"] = linear(w, h, g)
            t[x + "down_proj.weight"] = linear(h, w, g)
        write(t, layer + 1)
        print(f"layer {layer + 1}/{layers} written", file=sys.stderr, flush=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)


if __name__ == "__main__":
    main()
