// The architecture registry (include/ferry/models/architectures.h): one entry per family member. Adding a family:
// its models/ file, one entry here (and a GGUF table if llama.cpp writes it), its tests — docs/architecture.md.
#include "ferry/models/architectures.h"

#include <algorithm>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/models/bloom.h"
#include "ferry/models/gemma.h"
#include "ferry/models/gpt2.h"
#include "ferry/models/gpt_neox.h"
#include "ferry/models/gptj.h"
#include "ferry/models/llama.h"
#include "ferry/models/opt.h"
#include "ferry/models/phi3.h"
#include "ferry/models/t5.h"

namespace ferry::models {
namespace {

// ---- GGUF tensor names (llama.cpp's gguf-py constants.py MODEL_TENSOR and their HF counterparts) ----------------

constexpr NamePair kLlamaGgufGlobals[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};
constexpr NamePair kLlamaGgufBlocks[] = {
    {"attn_norm", "input_layernorm"}, {"attn_q", "self_attn.q_proj"},      {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},   {"attn_output", "self_attn.o_proj"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},    {"ffn_up", "mlp.up_proj"},           {"ffn_down", "mlp.down_proj"},
};
constexpr GgufTensorNames kLlamaGgufNames{kLlamaGgufGlobals, "model.layers", kLlamaGgufBlocks};
constexpr NamePair kQwen3GgufBlocks[] = {
    {"attn_norm", "input_layernorm"},    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},      {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};
constexpr GgufTensorNames kQwen3GgufNames{kLlamaGgufGlobals, "model.layers", kQwen3GgufBlocks};

// Mixtures of experts: the router, each layer's experts stacked ([E, out, in]), every layer sparse (llama.cpp has no
// dense layers between sparse ones). Mixtral is written as "llama" (with <arch>.expert_count): w1 = gate, w3 = up,
// w2 = down. Qwen2-MoE (qwen2moe) adds the shared expert and its gate; Qwen3-MoE (qwen3moe) has q/k norms.
constexpr NamePair kMixtralGgufBlocks[] = {
    {"attn_norm", "input_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate_inp", "block_sparse_moe.gate"},
};
constexpr GgufStackedExperts kMixtralGgufExperts[] = {{"ffn_gate_exps", "block_sparse_moe.experts", "w1"},
                                                      {"ffn_up_exps", "block_sparse_moe.experts", "w3"},
                                                      {"ffn_down_exps", "block_sparse_moe.experts", "w2"}};
constexpr GgufTensorNames kMixtralGgufNames{kLlamaGgufGlobals, "model.layers", kMixtralGgufBlocks, kMixtralGgufExperts};
constexpr NamePair kQwen2MoeGgufBlocks[] = {
    {"attn_norm", "input_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate_inp", "mlp.gate"},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
};
constexpr NamePair kQwen3MoeGgufBlocks[] = {
    {"attn_norm", "input_layernorm"},    {"attn_q", "self_attn.q_proj"},           {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},      {"attn_output", "self_attn.o_proj"},      {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"}, {"ffn_norm", "post_attention_layernorm"}, {"ffn_gate_inp", "mlp.gate"},
};
constexpr GgufStackedExperts kQwenMoeGgufExperts[] = {{"ffn_gate_exps", "mlp.experts", "gate_proj"},
                                                      {"ffn_up_exps", "mlp.experts", "up_proj"},
                                                      {"ffn_down_exps", "mlp.experts", "down_proj"}};
constexpr GgufTensorNames kQwen2MoeGgufNames{kLlamaGgufGlobals, "model.layers", kQwen2MoeGgufBlocks,
                                             kQwenMoeGgufExperts};
constexpr GgufTensorNames kQwen3MoeGgufNames{kLlamaGgufGlobals, "model.layers", kQwen3MoeGgufBlocks,
                                             kQwenMoeGgufExperts};

// GPT-NeoX (gptneox): LayerNorms with biases; query_key_value's rows reordered by the converter (gguf_model.cc).
constexpr NamePair kGptNeoXGgufGlobals[] = {
    {"token_embd.weight", "gpt_neox.embed_in.weight"},
    {"output_norm.weight", "gpt_neox.final_layer_norm.weight"},
    {"output_norm.bias", "gpt_neox.final_layer_norm.bias"},
    {"output.weight", "embed_out.weight"},
};
constexpr NamePair kGptNeoXGgufBlocks[] = {
    {"attn_norm", "input_layernorm"},   {"attn_qkv", "attention.query_key_value"},
    {"attn_output", "attention.dense"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_up", "mlp.dense_h_to_4h"},    {"ffn_down", "mlp.dense_4h_to_h"},
};
constexpr GgufTensorNames kGptNeoXGgufNames{kGptNeoXGgufGlobals, "gpt_neox.layers", kGptNeoXGgufBlocks};
// Phi-3 (phi3): the fused projections as the folder holds them (qkv_proj rows q | k | v, gate_up_proj gate | up).
constexpr NamePair kPhi3GgufBlocks[] = {
    {"attn_norm", "input_layernorm"},         {"attn_qkv", "self_attn.qkv_proj"}, {"attn_output", "self_attn.o_proj"},
    {"ffn_norm", "post_attention_layernorm"}, {"ffn_up", "mlp.gate_up_proj"},     {"ffn_down", "mlp.down_proj"},
};
constexpr GgufTensorNames kPhi3GgufNames{kLlamaGgufGlobals, "model.layers", kPhi3GgufBlocks};
// BLOOM (bloom): LayerNorms with biases, the embedding's own norm; query_key_value reordered as for gptneox.
constexpr NamePair kBloomGgufGlobals[] = {
    {"token_embd.weight", "transformer.word_embeddings.weight"},
    {"token_embd_norm.weight", "transformer.word_embeddings_layernorm.weight"},
    {"token_embd_norm.bias", "transformer.word_embeddings_layernorm.bias"},
    {"output_norm.weight", "transformer.ln_f.weight"},
    {"output_norm.bias", "transformer.ln_f.bias"},
    {"output.weight", "lm_head.weight"},
};
constexpr NamePair kBloomGgufBlocks[] = {
    {"attn_norm", "input_layernorm"},        {"attn_qkv", "self_attention.query_key_value"},
    {"attn_output", "self_attention.dense"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_up", "mlp.dense_h_to_4h"},         {"ffn_down", "mlp.dense_4h_to_h"},
};
constexpr GgufTensorNames kBloomGgufNames{kBloomGgufGlobals, "transformer.h", kBloomGgufBlocks};

constexpr GgufArchitecture kGgufLlama{"llama", "LlamaForCausalLM", /*interleaved_qk_rows=*/true, &kLlamaGgufNames};
constexpr GgufArchitecture kGgufMixtral{
    "llama",          "MixtralForCausalLM",         /*interleaved_qk_rows=*/true, &kMixtralGgufNames,
    /*experts=*/true, /*moe_normalizes_top_k=*/true};
constexpr GgufArchitecture kGgufQwen2{"qwen2", "Qwen2ForCausalLM", /*interleaved_qk_rows=*/false, &kLlamaGgufNames};
constexpr GgufArchitecture kGgufQwen3{"qwen3", "Qwen3ForCausalLM", /*interleaved_qk_rows=*/false, &kQwen3GgufNames};
constexpr GgufArchitecture kGgufQwen2Moe{"qwen2moe",          "Qwen2MoeForCausalLM", /*interleaved_qk_rows=*/false,
                                         &kQwen2MoeGgufNames, /*experts=*/true,      /*moe_normalizes_top_k=*/false};
constexpr GgufArchitecture kGgufQwen3Moe{"qwen3moe",          "Qwen3MoeForCausalLM", /*interleaved_qk_rows=*/false,
                                         &kQwen3MoeGgufNames, /*experts=*/true,      /*moe_normalizes_top_k=*/true};
constexpr GgufArchitecture kGgufGptNeoX{"gptneox", "GPTNeoXForCausalLM", /*interleaved_qk_rows=*/false,
                                        &kGptNeoXGgufNames};
constexpr GgufArchitecture kGgufPhi3{"phi3", "Phi3ForCausalLM", /*interleaved_qk_rows=*/false, &kPhi3GgufNames};
constexpr GgufArchitecture kGgufBloom{"bloom", "BloomForCausalLM", /*interleaved_qk_rows=*/false, &kBloomGgufNames};
// Gemma 2 / Gemma 3 (gemma2, gemma3): four norms per layer, Gemma 3's q/k norms; the converter stores every norm
// weight as 1 + w (gguf_config says so to GemmaRMSNorm) and drops lm_head (always tied).
constexpr NamePair kGemmaGgufBlocks[] = {
    {"attn_norm", "input_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};
constexpr GgufTensorNames kGemmaGgufNames{kLlamaGgufGlobals, "model.layers", kGemmaGgufBlocks};
constexpr GgufArchitecture kGgufGemma2{"gemma2", "Gemma2ForCausalLM", /*interleaved_qk_rows=*/false, &kGemmaGgufNames};
constexpr GgufArchitecture kGgufGemma3{"gemma3", "Gemma3ForCausalLM", /*interleaved_qk_rows=*/false, &kGemmaGgufNames};
constexpr const GgufArchitecture* kGgufArchitectures[] = {&kGgufLlama,    &kGgufMixtral,  &kGgufQwen2,   &kGgufQwen3,
                                                          &kGgufQwen2Moe, &kGgufQwen3Moe, &kGgufGptNeoX, &kGgufPhi3,
                                                          &kGgufBloom,    &kGgufGemma2,   &kGgufGemma3};

// ---- tied parameters --------------------------------------------------------------------------------------------

constexpr TiedKey kLlamaTied[] = {{"lm_head.weight", "model.embed_tokens.weight"}};
constexpr TiedKey kGemma3ConditionalTied[] = {
    {"language_model.lm_head.weight", "language_model.model.embed_tokens.weight"}};
constexpr TiedKey kGpt2Tied[] = {{"lm_head.weight", "transformer.wte.weight"}};
constexpr TiedKey kBloomTied[] = {{"lm_head.weight", "transformer.word_embeddings.weight"}};
// GPT-NeoX checkpoints name the head embed_out (transformers 5 renames it lm_head on load; ferry keeps the key).
constexpr TiedKey kGptNeoXTied[] = {{"embed_out.weight", "gpt_neox.embed_in.weight"}};
constexpr TiedKey kOptTied[] = {{"lm_head.weight", "model.decoder.embed_tokens.weight"}};
constexpr TiedKey kT5Tied[] = {{"encoder.embed_tokens.weight", "shared.weight", true},
                               {"decoder.embed_tokens.weight", "shared.weight", true},
                               {"lm_head.weight", "shared.weight"}};

// ---- builders ---------------------------------------------------------------------------------------------------

template <const LlamaVariant& V>
std::shared_ptr<LanguageModel> build_llama(const ConfigJson& c, DType d) {
  return make_llama_family(c, V, d);
}
std::shared_ptr<LanguageModel> build_gpt2(const ConfigJson& c, DType d) { return make_gpt2(c, d); }
std::shared_ptr<LanguageModel> build_bloom(const ConfigJson& c, DType d) { return make_bloom(c, d); }
std::shared_ptr<LanguageModel> build_gptj(const ConfigJson& c, DType d) { return make_gptj(c, d); }
std::shared_ptr<LanguageModel> build_gpt_neox(const ConfigJson& c, DType d) { return make_gpt_neox(c, d); }
std::shared_ptr<LanguageModel> build_opt(const ConfigJson& c, DType d) { return make_opt(c, d); }
std::shared_ptr<LanguageModel> build_phi3(const ConfigJson& c, DType d) { return make_phi3(c, d); }
std::shared_ptr<LanguageModel> build_gemma2(const ConfigJson& c, DType d) { return make_gemma2(c, d); }
std::shared_ptr<LanguageModel> build_gemma3(const ConfigJson& c, DType d) { return make_gemma3(c, d); }
std::shared_ptr<LanguageModel> build_gemma3_conditional(const ConfigJson& c, DType d) {
  return make_gemma3_conditional(c, d);
}
std::shared_ptr<LanguageModel> build_t5(const ConfigJson& c, DType d) { return make_t5(c, d); }

const Architecture kArchitectures[] = {
    {.name = "LlamaForCausalLM",
     .model_type = "llama",
     .build = build_llama<kLlamaVariant>,
     .no_split_module = "LlamaDecoderLayer",
     .tied_keys = kLlamaTied,
     .gguf = &kGgufLlama},
    {.name = "MistralForCausalLM",
     .model_type = "mistral",
     .build = build_llama<kMistralVariant>,
     .no_split_module = "MistralDecoderLayer",
     .tied_keys = kLlamaTied,
     .gguf = &kGgufLlama},
    {.name = "Qwen2ForCausalLM",
     .model_type = "qwen2",
     .build = build_llama<kQwen2Variant>,
     .no_split_module = "Qwen2DecoderLayer",
     .tied_keys = kLlamaTied,
     .gguf = &kGgufQwen2},
    {.name = "Qwen3ForCausalLM",
     .model_type = "qwen3",
     .build = build_llama<kQwen3Variant>,
     .no_split_module = "Qwen3DecoderLayer",
     .tied_keys = kLlamaTied,
     .gguf = &kGgufQwen3},
    {.name = "MixtralForCausalLM",
     .model_type = "mixtral",
     .build = build_llama<kMixtralVariant>,
     .no_split_module = "MixtralDecoderLayer",
     .tied_keys = kLlamaTied,
     .gguf = &kGgufMixtral},
    {.name = "Qwen2MoeForCausalLM",
     .model_type = "qwen2_moe",
     .build = build_llama<kQwen2MoeVariant>,
     .no_split_module = "Qwen2MoeDecoderLayer",
     .tied_keys = kLlamaTied,
     .gguf = &kGgufQwen2Moe},
    {.name = "Qwen3MoeForCausalLM",
     .model_type = "qwen3_moe",
     .build = build_llama<kQwen3MoeVariant>,
     .no_split_module = "Qwen3MoeDecoderLayer",
     .tied_keys = kLlamaTied,
     .gguf = &kGgufQwen3Moe},
    {.name = "BloomForCausalLM",
     .model_type = "bloom",
     .build = build_bloom,
     .no_split_module = "BloomBlock",
     .tied_keys = kBloomTied,
     .gguf = &kGgufBloom},
    {.name = "GPT2LMHeadModel",
     .model_type = "gpt2",
     .build = build_gpt2,
     .no_split_module = "GPT2Block",
     .tied_keys = kGpt2Tied},
    {.name = "GPTJForCausalLM",
     .model_type = "gptj",
     .build = build_gptj,
     .no_split_module = "GPTJBlock",
     .tied_keys = kGpt2Tied},
    {.name = "GPTNeoXForCausalLM",
     .model_type = "gpt_neox",
     .build = build_gpt_neox,
     .no_split_module = "GPTNeoXLayer",
     .tied_keys = kGptNeoXTied,
     .gguf = &kGgufGptNeoX},
    {.name = "OPTForCausalLM",
     .model_type = "opt",
     .build = build_opt,
     .no_split_module = "OPTDecoderLayer",
     .tied_keys = kOptTied},
    {.name = "Phi3ForCausalLM",
     .model_type = "phi3",
     .build = build_phi3,
     .no_split_module = "Phi3DecoderLayer",
     .tied_keys = kLlamaTied,
     .gguf = &kGgufPhi3},
    {.name = "Gemma2ForCausalLM",
     .model_type = "gemma2",
     .build = build_gemma2,
     .no_split_module = "Gemma2DecoderLayer",
     .tied_keys = kLlamaTied,
     .gguf = &kGgufGemma2},
    {.name = "Gemma3ForCausalLM",
     .model_type = "gemma3_text",
     .build = build_gemma3,
     .no_split_module = "Gemma3DecoderLayer",
     .tied_keys = kLlamaTied,
     .gguf = &kGgufGemma3},
    {.name = "Gemma3ForConditionalGeneration",  // text only (gemma.h)
     .model_type = "gemma3",
     .build = build_gemma3_conditional,
     .no_split_module = "Gemma3DecoderLayer",
     .tied_keys = kGemma3ConditionalTied},
    {.name = "T5ForConditionalGeneration",
     .model_type = "t5",
     .encoder_decoder = true,
     .build = build_t5,
     .no_split_module = "T5Block",
     .tied_keys = kT5Tied},
    {.name = "MT5ForConditionalGeneration",
     .model_type = "mt5",
     .encoder_decoder = true,
     .build = build_t5,
     .no_split_module = "T5Block",
     .tied_keys = kT5Tied},
    {.name = "UMT5ForConditionalGeneration",
     .model_type = "umt5",
     .encoder_decoder = true,
     .build = build_t5,
     .no_split_module = "T5Block",
     .tied_keys = kT5Tied},
};

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "<prefix>.<layer>.<middle>.<weight|bias>" -> {layer, middle, kind}; nullopt for any other shape.
struct BlockName {
  std::string_view layer, middle, kind;
};
std::optional<BlockName> split_block_name(std::string_view name, std::string_view prefix) {
  if (name.size() <= prefix.size() + 1 || name.substr(0, prefix.size()) != prefix || name[prefix.size()] != '.')
    return std::nullopt;
  const std::string_view rest = name.substr(prefix.size() + 1);
  const std::size_t dot1 = rest.find('.'), dot2 = rest.rfind('.');
  if (dot1 == std::string_view::npos || dot2 <= dot1) return std::nullopt;
  BlockName b{rest.substr(0, dot1), rest.substr(dot1 + 1, dot2 - dot1 - 1), rest.substr(dot2 + 1)};
  if (!all_digits(b.layer) || (b.kind != "weight" && b.kind != "bias")) return std::nullopt;
  return b;
}

// One direction of the GGUF <-> HF mapping: `from` names are the pairs' first (gguf) or second (hf) members.
std::optional<std::string> rename(const GgufTensorNames& names, std::string_view name, bool to_hf) {
  for (const auto& [gguf, hf] : names.globals)
    if (name == (to_hf ? gguf : hf)) return std::string(to_hf ? hf : gguf);
  const auto b = split_block_name(name, to_hf ? std::string_view("blk") : names.hf_layers);
  if (!b) return std::nullopt;
  for (const auto& [gguf, hf] : names.blocks)
    if (b->middle == (to_hf ? gguf : hf))
      return std::string(to_hf ? names.hf_layers : "blk") + "." + std::string(b->layer) + "." +
             std::string(to_hf ? hf : gguf) + "." + std::string(b->kind);
  return std::nullopt;
}

}  // namespace

std::span<const Architecture> architectures() { return kArchitectures; }

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& a : kArchitectures)
    if (a.name == name) return &a;
  return nullptr;
}

std::string supported_architectures_list() {
  std::string s;
  for (const Architecture& a : kArchitectures)
    s += (s.empty() ? "" : ", ") + std::string(a.name) + " (" + std::string(a.model_type) + ")";
  return s;
}

const Architecture& architecture_for(const ConfigJson& config) {
  const std::optional<std::string> named = config.architecture();
  if (named)
    if (const Architecture* a = find_architecture(*named)) return *a;
  const std::string model_type = config.model_type();
  for (const Architecture& a : kArchitectures) {
    if (model_type == a.model_type) {
      if (named)
        log_info("{}: architectures[0] is {}; loading {} for model_type \"{}\"", config.where(), *named, a.name,
                 model_type);
      return a;
    }
  }
  config.fail("unknown architecture: architectures[0] = " + (named ? "\"" + *named + "\"" : std::string("(absent)")) +
                  ", model_type = " + (model_type.empty() ? std::string("(absent)") : "\"" + model_type + "\""),
              "ferry implements " + supported_architectures_list() + ".");
}

std::string supported_gguf_architectures_list() {
  std::string s;
  for (const GgufArchitecture* g : kGgufArchitectures) {
    const std::string entry = std::string(g->name) + " (" + std::string(g->hf_architecture) + ")";
    s += (s.empty() ? "" : ", ") + entry;
  }
  return s;
}

const GgufArchitecture* find_gguf_architecture(std::string_view name) {
  for (const GgufArchitecture* g : kGgufArchitectures)
    if (g->name == name) return g;
  return nullptr;
}

const GgufArchitecture* find_gguf_architecture(std::string_view name, bool experts) {
  for (const GgufArchitecture* g : kGgufArchitectures)
    if (g->name == name && g->experts == experts) return g;
  return find_gguf_architecture(name);
}

std::optional<std::string> hf_tensor_name(const GgufTensorNames& names, std::string_view gguf_name) {
  return rename(names, gguf_name, /*to_hf=*/true);
}

std::optional<std::string> gguf_tensor_name(const GgufTensorNames& names, std::string_view hf_name) {
  return rename(names, hf_name, /*to_hf=*/false);
}

std::optional<std::pair<std::string, std::string>> hf_expert_names(const GgufTensorNames& names,
                                                                   std::string_view gguf_name) {
  const auto b = split_block_name(gguf_name, "blk");
  if (!b || b->kind != "weight") return std::nullopt;
  for (const GgufStackedExperts& s : names.stacked_experts)
    if (b->middle == s.gguf)
      return std::pair{std::string(names.hf_layers) + "." + std::string(b->layer) + "." + std::string(s.experts) + ".",
                       "." + std::string(s.projection) + ".weight"};
  return std::nullopt;
}

std::optional<std::pair<std::string, int64_t>> gguf_expert_name(const GgufTensorNames& names,
                                                                std::string_view hf_name) {
  // "<hf_layers>.<i>.<experts>.<k>.<projection>.weight"
  const auto b = split_block_name(hf_name, names.hf_layers);
  if (!b || b->kind != "weight") return std::nullopt;
  for (const GgufStackedExperts& s : names.stacked_experts) {
    const std::string_view m = b->middle;
    if (m.size() <= s.experts.size() + s.projection.size() + 2 || !m.starts_with(s.experts) ||
        m[s.experts.size()] != '.' || !m.ends_with(s.projection) || m[m.size() - s.projection.size() - 1] != '.')
      continue;
    const std::string_view k = m.substr(s.experts.size() + 1, m.size() - s.experts.size() - s.projection.size() - 2);
    if (!all_digits(k)) continue;
    return std::pair{"blk." + std::string(b->layer) + "." + std::string(s.gguf) + ".weight",
                     static_cast<int64_t>(std::stoll(std::string(k)))};
  }
  return std::nullopt;
}

}  // namespace ferry::models
