// T5 (Raffel et al., 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer",
// arXiv 1910.10683): T5ForConditionalGeneration after transformers' models/t5/modeling_t5.py, for T5 v1.0 (relu
// FFN, lm_head tied to `shared`, decoder output scaled by d_model^-0.5), T5 v1.1 / T0pp / Flan-T5 (gated-gelu FFN,
// untied lm_head, no scaling), MT5 (the v1.1 graph under model_type "mt5") and UMT5 (the same graph with a
// relative_attention_bias in every self-attention layer: model_type "umt5").
//
// Legend: S = encoder tokens, T = decoder tokens, C = d_model, H = num_heads, D = d_kv, F = d_ff, V = vocab_size.
//
// Module tree and parameter names are transformers' (the checkpoint keys):
//   shared  encoder.{embed_tokens (= shared), block.N.layer.{0: SelfAttention.{q,k,v,o[,relative_attention_bias]}
//   + layer_norm, 1: DenseReluDense.{wi | wi_0, wi_1; wo} + layer_norm}, final_layer_norm}
//   decoder.{embed_tokens (= shared), block.N.layer.{0: SelfAttention, 1: EncDecAttention.{q,k,v,o} + layer_norm,
//   2: DenseReluDense + layer_norm}, final_layer_norm}  lm_head (= shared when tie_word_embeddings)
// Only block 0 of each stack owns relative_attention_bias: its position bias [H, T, S] is passed to the blocks
// after it. Activations are f32 whatever the weights' dtype, which is why ferry needs none of transformers' fp16
// clamping (T5 overflows f16 activations: transformers clamps hidden states to the f16 range in every block).
#pragma once

#include <memory>
#include <string>

#include "ferry/models/config.h"
#include "ferry/models/seq2seq_lm.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/dropout.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/norm.h"

namespace ferry::models {

/// T5Config: config.json keys with transformers' defaults.
struct T5Config {
  std::string architecture = "T5ForConditionalGeneration", model_type = "t5";
  int64_t vocab_size = 32128, d_model = 512, d_kv = 64, d_ff = 2048, num_layers = 6, num_decoder_layers = 6,
          num_heads = 8;
  int64_t relative_attention_num_buckets = 32, relative_attention_max_distance = 128;
  double layer_norm_epsilon = 1e-6, dropout_rate = 0.1;
  std::string dense_act_fn = "relu";  // from feed_forward_proj: "relu", "gated-gelu" (→ gelu_new), "gated-silu", ...
  bool is_gated_act = false;
  bool tie_word_embeddings = true;    // lm_head is `shared`
  bool scale_decoder_outputs = true;  // multiply the decoder output by d_model^-0.5 (T5 v1.0)
  int64_t decoder_start_token_id = 0, pad_token_id = 0;
  std::vector<int64_t> eos_token_ids = {1};
  /// UMT5: every self-attention layer owns its relative_attention_bias (T5: only block 0, shared by the rest).
  bool per_layer_position_bias = false;

  static T5Config from_json(const ConfigJson& json);
};

/// transformers' T5LayerNorm: RMSNorm without mean or bias.
class T5LayerNorm : public nn::RMSNorm {
 public:
  using nn::RMSNorm::RMSNorm;
  std::string type_name() const override { return "T5LayerNorm"; }
};

/// One attention of T5: self-attention (encoder: bidirectional; decoder: causal, with the decoder's KV cache) or
/// cross-attention over the encoder output. No 1/√D scaling; the position bias is added to the scores.
/// x: [T, C] -> Dict{"hidden": [T, C], "position_bias": [H, T, S] (undefined for cross-attention)}.
class T5Attention : public nn::Module {
 public:
  T5Attention(const T5Config& c, bool has_relative_attention_bias, bool is_decoder, bool is_cross, int64_t layer_idx,
              DType dtype);
  std::string type_name() const override { return "T5Attention"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  /// The bias [H, T, S] (on the cpu) of `query_length` queries at positions past .. past + query_length - 1 over
  /// `key_length` keys; the bucket ids go to `device`, where the module runs.
  Tensor compute_bias(int64_t query_length, int64_t key_length, int64_t past, Device device);
  /// The forward over a Seq2SeqBatch (decoder only): per-sequence caches, encoder outputs and position biases.
  nn::Value forward_batch(const nn::Args& args, const Seq2SeqBatch& batch);

  std::shared_ptr<nn::Linear> q, k, v, o;
  std::shared_ptr<nn::Embedding> relative_attention_bias;  // block 0 of self-attention only

 private:
  bool is_decoder_, is_cross_;
  int64_t layer_idx_, num_heads_, d_kv_, num_buckets_, max_distance_;
};

/// relu / gelu_new FFN: wo(act(wi(x))), or gated: wo(act(wi_0(x)) · wi_1(x)). x: [T, C] -> [T, C].
class T5DenseActDense : public nn::Module {
 public:
  T5DenseActDense(const T5Config& c, DType dtype);
  std::string type_name() const override { return gated_ ? "T5DenseGatedActDense" : "T5DenseActDense"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> wi, wi_0, wi_1, wo;

 private:
  bool gated_;
  std::string act_;
};

/// layer.0 / layer.1 / layer.2 of a block: pre-norm sublayer + residual. Self-attention, cross-attention or FFN.
class T5Sublayer : public nn::Module {
 public:
  enum class Kind { SelfAttention, CrossAttention, FeedForward };
  T5Sublayer(Kind kind, const T5Config& c, bool has_relative_attention_bias, bool is_decoder, int64_t layer_idx,
             DType dtype);
  std::string type_name() const override;
  /// x: [T, C] -> Dict{"hidden", "position_bias"} (attention) or [T, C] (FFN).
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

 private:
  Kind kind_;
  std::shared_ptr<nn::Module> inner_;
  std::shared_ptr<T5LayerNorm> layer_norm_;
};

/// T5Block: x [T, C] -> Dict{"hidden": [T, C], "position_bias": the self-attention bias, for the next block}.
class T5Block : public nn::Module {
 public:
  T5Block(const T5Config& c, bool is_decoder, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return "T5Block"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::ModuleList> layer;

 private:
  bool is_decoder_;
};

/// T5Stack (encoder or decoder): input_ids [T] -> hidden [T, C] after final_layer_norm.
class T5Stack : public nn::Module {
 public:
  T5Stack(const T5Config& c, bool is_decoder, DType dtype);
  std::string type_name() const override { return "T5Stack"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Embedding> embed_tokens;
  std::shared_ptr<nn::ModuleList> block;
  std::shared_ptr<T5LayerNorm> final_layer_norm;
  std::shared_ptr<nn::Dropout> dropout;

 private:
  bool is_decoder_, per_layer_bias_;
};

class T5ForConditionalGeneration : public Seq2SeqLM {
 public:
  T5ForConditionalGeneration(const T5Config& c, DType dtype);
  std::string type_name() const override { return config_.architecture; }
  /// seq2seq_lm.h's forward contract.
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();
  const T5Config& config() const noexcept { return config_; }
  nn::Value forward_batch(const nn::Args& args, const Seq2SeqBatch& batch);

  std::shared_ptr<nn::Embedding> shared;
  std::shared_ptr<T5Stack> encoder, decoder;
  std::shared_ptr<nn::Linear> lm_head;

 private:
  T5Config config_;
};

/// T5's bucket of a relative position (key − query), transformers' _relative_position_bucket (in f32 as torch).
int64_t t5_relative_position_bucket(int64_t relative_position, bool bidirectional, int64_t num_buckets,
                                    int64_t max_distance);

std::shared_ptr<Seq2SeqLM> make_t5(const ConfigJson& config, DType dtype);

}  // namespace ferry::models
