"""Folders shaped like the ~1B-parameter members of the dense families, written by transformers' save_pretrained
with random bf16 weights, for scripts/bench-families.

    bench_families_make.py FAMILY OUT_DIR [--layers N] [--dtype float16]

FAMILY (the shapes of the Hub configs named; N layers instead of theirs where given):
  qwen3   Qwen3-1.7B: hidden 2048, MLP 6144, 16 query / 8 KV heads of 128, vocabulary 151936, tied; 16 of 28 layers
          by default (1.1B parameters)
  gemma3  gemma-3-1b-pt: hidden 1152, MLP 6912, 4 query / 1 KV heads of 256, vocabulary 262144, sliding window 512
          on 5 of every 6 layers, local rope base 10000, global 1e6; all 26 layers (1.0B)
  phi3    Phi-3-mini-4k: hidden 3072, MLP 8192, 32 heads of 96, vocabulary 32064, untied; 8 of 32 layers (1.1B)
  llama   TinyLlama-1.1B: hidden 2048, MLP 5632, 32 query / 4 KV heads of 64, vocabulary 32000, untied; all 22
          layers (1.1B; scripts/bench-amx)
  llama3  Llama-3-8B: hidden 4096, MLP 14336, 32 query / 8 KV heads of 128, vocabulary 128256, untied; 4 of 32
          layers by default (1.9B parameters, of which the embedding and the head are 1.05B: scripts/bench-plans)
  llama-draft  a draft for it: TinyLlama's vocabulary, hidden 768, MLP 2048, 12 query / 4 KV heads of 64, 6 layers
          (0.09B, a twelfth; scripts/bench-speculative)
Weights are transformers' own initialisation (from_config), in bf16 (--dtype float16: f16); only the speed is
measured.
"""
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM

SHAPES = {
    "qwen3": dict(model_type="qwen3", hidden_size=2048, intermediate_size=6144, num_hidden_layers=16,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                  max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True),
    "gemma3": dict(model_type="gemma3_text", hidden_size=1152, intermediate_size=6912, num_hidden_layers=26,
                   num_attention_heads=4, num_key_value_heads=1, head_dim=256, vocab_size=262144,
                   max_position_embeddings=32768, rms_norm_eps=1e-6, sliding_window=512, query_pre_attn_scalar=256,
                   rope_theta=1000000.0, rope_local_base_freq=10000.0, tie_word_embeddings=True),
    "phi3": dict(model_type="phi3", hidden_size=3072, intermediate_size=8192, num_hidden_layers=8,
                 num_attention_heads=32, num_key_value_heads=32, vocab_size=32064, max_position_embeddings=4096,
                 original_max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=10000.0,
                 tie_word_embeddings=False),
    "llama": dict(model_type="llama", hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                  num_attention_heads=32, num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048,
                  rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False),
    "llama3": dict(model_type="llama", hidden_size=4096, intermediate_size=14336, num_hidden_layers=4,
                   num_attention_heads=32, num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192,
                   rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False),
    "llama-draft": dict(model_type="llama", hidden_size=768, intermediate_size=2048, num_hidden_layers=6,
                        num_attention_heads=12, num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048,
                        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False),
}


def main():
    family, out = sys.argv[1], sys.argv[2]
    shape = dict(SHAPES[family])
    if "--layers" in sys.argv:
        shape["num_hidden_layers"] = int(sys.argv[sys.argv.index("--layers") + 1])
    config = AutoConfig.for_model(shape.pop("model_type"), **shape)
    dtype = torch.bfloat16
    if "--dtype" in sys.argv:
        dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}[sys.argv[sys.argv.index("--dtype") + 1]]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.save_pretrained(out)
    print(f"{family}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters -> {out}")


if __name__ == "__main__":
    main()
