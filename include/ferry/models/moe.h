// Sparse mixture-of-experts feed-forward blocks: Mixtral's block_sparse_moe, Qwen2-MoE's and Qwen3-MoE's mlp.
// transformers 5.24: models/mixtral/modeling_mixtral.py (MixtralSparseMoeBlock), models/qwen2_moe (Qwen2MoeSparseMoe
// Block, with a shared expert), models/qwen3_moe (Qwen3MoeSparseMoeBlock). Mixtral of Experts: arXiv 2401.04088.
//
// Legend: T = tokens, C = hidden_size, E = num_experts, K = num_experts_per_tok (top_k), I = one expert's width.
//
//   gate (router)   logits = x · Wgᵀ                      [T, E]
//                   p = softmax(logits) in f32; the K largest per token (ties: the lower expert first)
//                   w = p_topk / Σ p_topk   (Mixtral always; Qwen when norm_topk_prob)
//   experts.e       y_e = down(act(gate(x)) · up(x))       on the tokens routed to e only
//   out             Σ over routed (token, e), in ascending e: w · y_e        [T, C]
//   shared_expert   Qwen2-MoE: out += sigmoid(shared_expert_gate(x)) · shared_expert(x)
//
// Each expert is its own module (experts.0 .. experts.E-1, the keys of the checkpoints on the Hub and of
// save_pretrained), so a device map can place experts one by one and an offloaded expert is read only when a token
// routes to it: the block tells the hooks which experts will run (nn::announce_will_run) before it runs the first,
// so their reads start at once and overlap the others' compute.
//
// Where ferry differs from transformers 5.24, and why:
//  - transformers holds the experts as two stacked 3-D parameters (MixtralExperts.gate_up_proj [E, 2I, C],
//    down_proj [E, C, I]) and converts the per-expert checkpoint keys on load; ferry keeps one module per expert
//    under the checkpoint's own names (MixtralBlockSparseTop2MLP w1/w3/w2, Qwen2MoeMLP gate/up/down_proj), which
//    is what makes an expert a unit of the device map.
//  - The router is computed in f32 whatever the weights' dtype (transformers: the weights' dtype, then f32 for the
//    softmax).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/module.h"

namespace ferry::models {

/// The attribute names of a gated expert's three projections.
struct ExpertProjectionNames {
  std::string gate = "gate_proj", up = "up_proj", down = "down_proj";  // Mixtral: w1, w3, w2
};

/// One sparse block's shape, read from the family's config.
struct MoeConfig {
  std::string class_prefix;  // "Mixtral", "Qwen2Moe", "Qwen3Moe": MixtralSparseMoeBlock, ...
  std::string expert_class;  // one expert's class: "MixtralBlockSparseTop2MLP", "Qwen2MoeMLP"
  ExpertProjectionNames names;
  int64_t hidden_size = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;                            // num_experts_per_tok
  int64_t expert_intermediate_size = 0;         // Mixtral: intermediate_size; Qwen: moe_intermediate_size
  bool norm_topk_prob = true;                   // Mixtral: always
  int64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE; 0: no shared expert
};

/// A SwiGLU feed-forward under configurable names: down(silu(gate(x)) · up(x)). x: [T, C] -> [T, C]. One expert, a
/// shared expert, or a MoE model's dense layer.
class GatedMLP : public nn::Module {
 public:
  GatedMLP(std::string class_name, const ExpertProjectionNames& names, int64_t hidden_size, int64_t intermediate_size,
           DType dtype);
  std::string type_name() const override { return class_name_; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> gate_proj, up_proj, down_proj;

 private:
  std::string class_name_;
};

/// The router's linear layer under its transformers class name (MixtralTopKRouter, ...): weight [E, C], no bias.
class TopKRouter : public nn::Linear {
 public:
  TopKRouter(std::string class_name, int64_t hidden_size, int64_t num_experts, DType dtype)
      : nn::Linear(hidden_size, num_experts, /*bias=*/false, dtype), class_name_(std::move(class_name)) {}
  std::string type_name() const override { return class_name_; }

 private:
  std::string class_name_;
};

/// Which experts each token uses: ids [T, K] and their weights [T, K], best first.
struct Routing {
  int64_t tokens = 0, top_k = 0;
  std::vector<int32_t> experts;
  std::vector<float> weights;
};
/// The router's choice from its logits f32 [T, E] (any device; read on the host), as transformers computes it.
Routing route_tokens(const Tensor& router_logits, int64_t top_k, bool normalize);

/// Counts of the experts run, for reports: calls = routed (expert, step) pairs, tokens = routed (token, expert) pairs;
/// guessed = experts announced ahead by the previous sparse block (set_guessing), guessed_routed = those of them the
/// block then routed to (so guessed_routed / calls is how much of the routing was read ahead, guessed_routed / guessed
/// how many of the reads ahead were used).
struct ExpertUse {
  uint64_t calls = 0, tokens = 0;
  uint64_t guessed = 0, guessed_routed = 0;
  ExpertUse& operator+=(const ExpertUse& o) noexcept {
    calls += o.calls, tokens += o.tokens, guessed += o.guessed, guessed_routed += o.guessed_routed;
    return *this;
  }
};

/// The sparse block. x: [T, C] normed hidden states -> [T, C].
class SparseMoeBlock : public nn::Module {
 public:
  SparseMoeBlock(const MoeConfig& config, DType dtype);
  std::string type_name() const override { return config_.class_prefix + "SparseMoeBlock"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  const MoeConfig& config() const noexcept { return config_; }
  /// Expert runs since construction (a routed expert runs once per forward on all its tokens).
  ExpertUse use() const noexcept { return use_; }
  /// Guessing the next layer's experts (beyond transformers): once this block has routed its tokens, it applies
  /// `next`'s router to its own input — the residual stream changes little from one layer to the next — and records
  /// the experts that picks, which `next` scores when it routes (ExpertUse::guessed_routed). With `read_ahead` it
  /// also announces them (nn::announce_may_run), so offloaded guesses are read after what runs now, while this block
  /// and the next attention compute. Only when `next`'s router weight is in memory on this block's device (a guess
  /// never loads anything). nullptr: no guessing.
  void set_next(SparseMoeBlock* next, bool read_ahead = true) noexcept {
    next_ = next;
    read_ahead_ = read_ahead;
  }

  std::shared_ptr<TopKRouter> gate;
  std::shared_ptr<nn::ModuleList> experts;         // GatedMLP each
  std::shared_ptr<GatedMLP> shared_expert;         // Qwen2-MoE; null otherwise
  std::shared_ptr<nn::Linear> shared_expert_gate;  // Qwen2-MoE: [1, C]; null otherwise

 private:
  void guess_next(const Tensor& x);

  MoeConfig config_;
  ExpertUse use_;
  SparseMoeBlock* next_ = nullptr;
  bool read_ahead_ = true;
  std::vector<int32_t> guessed_;  // experts the previous block announced for this one (sorted), scored at routing
};

/// Turns guessing on (each sparse block of `model` guesses for the next one, in module order; with `read_ahead` the
/// guesses are also read ahead) or off.
void set_expert_guessing(nn::Module& model, bool on, bool read_ahead = true);
/// The ExpertUse of every sparse block of `model`, summed.
ExpertUse expert_use(nn::Module& model);

}  // namespace ferry::models
