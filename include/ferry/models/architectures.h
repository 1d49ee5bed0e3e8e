// The architecture registry: every model family ferry implements, one entry each, with everything loaders,
// planners, GGUF readers and writers need to know about it — the one place a new family is added
// (docs/architecture.md, "Adding a model family"). transformers spreads the same facts over its auto-class mappings
// (CONFIG_MAPPING, MODEL_FOR_CAUSAL_LM_MAPPING), each class's _no_split_modules / _tied_weights_keys, and
// integrations/ggml.py's GGUF tables.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/core/dtype.h"
#include "ferry/models/config.h"
#include "ferry/models/language_model.h"

namespace ferry::models {

using NamePair = std::pair<std::string_view, std::string_view>;

/// A GGUF block tensor that stacks a layer's experts (llama.cpp's ffn_{gate,up,down}_exps, torch shape [E, out, in])
/// and the HF names of its slices: "blk.<i>.<gguf>.weight"[k] <-> "<hf_layers>.<i>.<experts>.<k>.<projection>.weight".
struct GgufStackedExperts {
  std::string_view gguf;        // "ffn_gate_exps"
  std::string_view experts;     // "block_sparse_moe.experts" (Mixtral), "mlp.experts" (Qwen MoE)
  std::string_view projection;  // "w1", "gate_proj"
};

/// How a family's tensors are named in llama.cpp's GGUF files, both ways: whole-model tensors by full name, block
/// tensors as "blk.<i>.<gguf>.<weight|bias>" <-> "<hf_layers>.<i>.<hf>.<weight|bias>".
struct GgufTensorNames {
  std::span<const NamePair> globals;  // {gguf, hf}: {"token_embd.weight", "model.embed_tokens.weight"}, ...
  std::string_view hf_layers;         // "model.layers"
  std::span<const NamePair> blocks;   // {gguf, hf}: {"attn_q", "self_attn.q_proj"}, ...
  std::span<const GgufStackedExperts> stacked_experts = {};
};

/// A parameter that is another one's tensor: always (T5's encoder and decoder embeddings are its shared one), or when
/// config.json's tie_word_embeddings is true (an output head that is the input embedding).
struct TiedKey {
  std::string_view tied, source;
  bool always = false;
};

/// A llama.cpp architecture (general.architecture) ferry reads and writes.
struct GgufArchitecture {
  std::string_view name;             // "llama", "qwen2"
  std::string_view hf_architecture;  // the HF class its files load as
  /// llama.cpp's converter permutes each head's q/k rows for this architecture (its rotary pairs are adjacent):
  /// reading keeps them (rope_interleaved), writing an HF folder permutes them.
  bool interleaved_qk_rows = false;
  const GgufTensorNames* tensors = nullptr;
  /// A mixture of experts: its files have `<name>.expert_count` > 0. llama.cpp writes Mixtral as "llama", so two
  /// entries share that name, told apart by this.
  bool experts = false;
  /// Whether llama.cpp renormalises the top-k router weights for this architecture (its files do not say):
  /// Mixtral and qwen3moe do, qwen2moe does not (norm_topk_prob).
  bool moe_normalizes_top_k = true;
};

/// One model family member: an HF class and everything ferry needs to know to load, plan and convert it.
struct Architecture {
  std::string_view name;        // the HF class: "LlamaForCausalLM"
  std::string_view model_type;  // config.json's model_type: "llama"
  bool encoder_decoder = false;
  /// Reads config.json and builds the model (random weights; on meta inside init_empty_weights). Throws ferry::Error
  /// naming the config key for a config the family cannot run.
  std::shared_ptr<LanguageModel> (*build)(const ConfigJson& config, DType dtype) = nullptr;
  /// transformers' _no_split_modules: the block class plans keep whole (no_split_module_classes' default).
  std::string_view no_split_module;
  /// transformers' _tied_weights_keys with their source: names that hold one tensor.
  std::span<const TiedKey> tied_keys;
  /// The GGUF architecture its files use (read and write); nullptr: ferry has no GGUF support for it.
  const GgufArchitecture* gguf = nullptr;
};

/// Every family member, in a fixed order (the order error messages list them in).
std::span<const Architecture> architectures();

/// The entry for HF class `name`, or nullptr.
const Architecture* find_architecture(std::string_view name);

/// The entry to build for `config`: architectures[0] when ferry implements it; otherwise model_type's (transformers'
/// auto classes also go by model_type, so ["LlamaModel"] + "llama" loads LlamaForCausalLM). Throws ferry::Error
/// naming both keys and listing what ferry supports.
const Architecture& architecture_for(const ConfigJson& config);

/// The GGUF architecture named `name` ("llama"), or nullptr.
const GgufArchitecture* find_gguf_architecture(std::string_view name);
/// The one with experts or without (a "llama" file with experts is Mixtral); the first named `name` when only one
/// kind exists.
const GgufArchitecture* find_gguf_architecture(std::string_view name, bool experts);

/// "LlamaForCausalLM (llama), ..." — what ferry implements, for messages.
std::string supported_architectures_list();
/// "llama (LlamaForCausalLM), llama (MixtralForCausalLM), ..." — the GGUF architectures ferry reads, for messages.
std::string supported_gguf_architectures_list();

/// The HF name of a GGUF tensor name under `names` ("blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"),
/// or nullopt for names with no counterpart.
std::optional<std::string> hf_tensor_name(const GgufTensorNames& names, std::string_view gguf_name);
/// The GGUF name of an HF tensor name (the inverse), or nullopt.
std::optional<std::string> gguf_tensor_name(const GgufTensorNames& names, std::string_view hf_name);
/// For a GGUF tensor that stacks experts ("blk.3.ffn_gate_exps.weight"), the HF name of its slice k is
/// prefix + k + suffix: {"model.layers.3.block_sparse_moe.experts.", ".w1.weight"}. nullopt for other names.
std::optional<std::pair<std::string, std::string>> hf_expert_names(const GgufTensorNames& names,
                                                                   std::string_view gguf_name);
/// The inverse: an expert's HF tensor name -> {the stacked GGUF tensor's name, the expert's index k}
/// ("model.layers.3.block_sparse_moe.experts.5.w2.weight" -> {"blk.3.ffn_down_exps.weight", 5}), or nullopt.
std::optional<std::pair<std::string, int64_t>> gguf_expert_name(const GgufTensorNames& names, std::string_view hf_name);

}  // namespace ferry::models
