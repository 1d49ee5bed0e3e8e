// Sparse mixture-of-experts blocks (include/ferry/models/moe.h): the router, then each routed expert once per
// forward on all the tokens routed to it.
#include "ferry/models/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ferry/core/error.h"
#include "ferry/nn/hooks.h"
#include "ferry/ops/elementwise.h"
#include "ferry/ops/gather.h"
#include "ferry/ops/linear.h"

namespace ferry::models {

GatedMLP::GatedMLP(std::string class_name, const ExpertProjectionNames& names, int64_t hidden_size,
                   int64_t intermediate_size, DType dtype)
    : class_name_(std::move(class_name)) {
  gate_proj = register_module(names.gate, std::make_shared<nn::Linear>(hidden_size, intermediate_size, false, dtype));
  up_proj = register_module(names.up, std::make_shared<nn::Linear>(hidden_size, intermediate_size, false, dtype));
  down_proj = register_module(names.down, std::make_shared<nn::Linear>(intermediate_size, hidden_size, false, dtype));
}

// x: [T, C] -> [T, C]
nn::Value GatedMLP::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  return (*down_proj)(ops::silu_mul((*gate_proj)(x), (*up_proj)(x)));
}

Routing route_tokens(const Tensor& router_logits, int64_t top_k, bool normalize) {
  if (router_logits.dim() != 2) throw Error("router logits must be [T, E], got " + router_logits.str(), "route_tokens");
  const Tensor logits = router_logits.to(Device::cpu(), DType::F32);
  const int64_t t = logits.size(0), e = logits.size(1);
  if (top_k < 1 || top_k > e)
    throw Error("top_k " + std::to_string(top_k) + " is outside 1.." + std::to_string(e), "route_tokens");
  Routing r;
  r.tokens = t;
  r.top_k = top_k;
  r.experts.resize(static_cast<std::size_t>(t * top_k));
  r.weights.resize(static_cast<std::size_t>(t * top_k));
  const float* l = logits.data<float>();
  std::vector<float> p(static_cast<std::size_t>(e));
  std::vector<int32_t> order(static_cast<std::size_t>(e));
  for (int64_t i = 0; i < t; ++i) {
    const float* row = l + i * e;
    // softmax in f32, the row maximum subtracted first
    const float m = *std::max_element(row, row + e);
    float sum = 0.0f;
    for (int64_t j = 0; j < e; ++j) sum += (p[static_cast<std::size_t>(j)] = std::exp(row[j] - m));
    for (float& v : p) v /= sum;
    // the K largest probabilities, best first; on ties the lower expert
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
      const float pa = p[static_cast<std::size_t>(a)], pb = p[static_cast<std::size_t>(b)];
      return pa > pb || (pa == pb && a < b);
    });
    float kept = 0.0f;
    for (int64_t k = 0; k < top_k; ++k) kept += p[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])];
    for (int64_t k = 0; k < top_k; ++k) {
      const std::size_t at = static_cast<std::size_t>(i * top_k + k);
      const int32_t ex = order[static_cast<std::size_t>(k)];
      r.experts[at] = ex;
      r.weights[at] = normalize ? p[static_cast<std::size_t>(ex)] / kept : p[static_cast<std::size_t>(ex)];
    }
  }
  return r;
}

SparseMoeBlock::SparseMoeBlock(const MoeConfig& c, DType dtype) : config_(c) {
  if (c.num_experts < 1 || c.top_k < 1 || c.top_k > c.num_experts)
    throw Error("num_experts_per_tok (" + std::to_string(c.top_k) + ") must be between 1 and the number of experts (" +
                    std::to_string(c.num_experts) + ")",
                type_name());
  gate = register_module("gate", std::make_shared<TopKRouter>(c.class_prefix + "TopKRouter", c.hidden_size,
                                                              c.num_experts, dtype));
  experts = register_module("experts", std::make_shared<nn::ModuleList>());
  for (int64_t e = 0; e < c.num_experts; ++e)
    experts->push_back(
        std::make_shared<GatedMLP>(c.expert_class, c.names, c.hidden_size, c.expert_intermediate_size, dtype));
  if (c.shared_expert_intermediate_size > 0) {
    shared_expert = register_module("shared_expert",
                                    std::make_shared<GatedMLP>(c.class_prefix + "MLP", ExpertProjectionNames{},
                                                               c.hidden_size, c.shared_expert_intermediate_size,
                                                               dtype));
    shared_expert_gate = register_module("shared_expert_gate",
                                         std::make_shared<nn::Linear>(c.hidden_size, 1, false, dtype));
  }
}

// x: [T, C] -> [T, C]
nn::Value SparseMoeBlock::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  const int64_t t = x.size(0), c = x.size(1);
  const Routing r = route_tokens((*gate)(x), config_.top_k, config_.norm_topk_prob);

  // The tokens of each expert, in token order, with their weights.
  const std::size_t num_experts = experts->size();
  std::vector<std::vector<int64_t>> rows(num_experts);
  std::vector<std::vector<float>> weights(num_experts);
  for (std::size_t at = 0; at < r.experts.size(); ++at) {
    const auto e = static_cast<std::size_t>(r.experts[at]);
    rows[e].push_back(static_cast<int64_t>(at) / r.top_k);
    weights[e].push_back(r.weights[at]);
  }
  std::vector<nn::Module*> picked;
  for (std::size_t e = 0; e < num_experts; ++e)
    if (!rows[e].empty()) picked.push_back(&(*experts)[e]);
  nn::announce_will_run(picked);  // offloaded experts start reading now, in the order they run
  if (!guessed_.empty()) {        // how good the previous block's guess for this one was
    for (std::size_t e = 0; e < num_experts; ++e)
      if (!rows[e].empty() && std::binary_search(guessed_.begin(), guessed_.end(), static_cast<int32_t>(e)))
        ++use_.guessed_routed;
    guessed_.clear();
  }
  if (next_ != nullptr) guess_next(x);  // the next block's reads start behind this one's

  Tensor out = Tensor::zeros({t, c}, DType::F32);
  float* o = out.data<float>();
  for (std::size_t e = 0; e < num_experts; ++e) {
    if (rows[e].empty()) continue;
    const auto n = static_cast<int64_t>(rows[e].size());
    const Tensor ids = Tensor::from_vector(rows[e], {n}).to(x.device());
    const Tensor y = (*experts)[e](ops::embedding(x, ids)).to(Device::cpu(), DType::F32);
    const float* yp = y.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      float* dst = o + rows[e][static_cast<std::size_t>(i)] * c;
      const float w = weights[e][static_cast<std::size_t>(i)];
      for (int64_t j = 0; j < c; ++j) dst[j] += w * yp[i * c + j];
    }
    ++use_.calls;
    use_.tokens += static_cast<uint64_t>(n);
  }

  if (shared_expert) {  // Qwen2-MoE: out += sigmoid(shared_expert_gate(x)) · shared_expert(x)
    const Tensor s = (*shared_expert)(x).to(Device::cpu(), DType::F32);
    const Tensor g = (*shared_expert_gate)(x).to(Device::cpu(), DType::F32);
    const float *sp = s.data<float>(), *gp = g.data<float>();
    for (int64_t i = 0; i < t; ++i) {
      const float sig = 1.0f / (1.0f + std::exp(-gp[i]));
      for (int64_t j = 0; j < c; ++j) o[i * c + j] += sig * sp[i * c + j];
    }
  }
  return out.to(x.device());
}

void SparseMoeBlock::guess_next(const Tensor& x) {
  const Tensor& w = next_->gate->weight();
  if (w.is_meta() || w.device() != x.device()) return;  // the router is offloaded: guessing would read it
  const Routing g = route_tokens(ops::linear(x, w), next_->config_.top_k, /*normalize=*/false);
  std::vector<int32_t> ids = g.experts;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<nn::Module*> ahead;
  for (int32_t e : ids) ahead.push_back(&(*next_->experts)[static_cast<std::size_t>(e)]);
  next_->guessed_ = std::move(ids);
  next_->use_.guessed += ahead.size();
  if (read_ahead_) nn::announce_may_run(ahead);
}

void set_expert_guessing(nn::Module& model, bool on, bool read_ahead) {
  SparseMoeBlock* previous = nullptr;
  for (const auto& named : model.named_modules()) {
    auto* block = dynamic_cast<SparseMoeBlock*>(named.module);
    if (block == nullptr) continue;
    if (previous != nullptr) previous->set_next(on ? block : nullptr, read_ahead);
    block->set_next(nullptr);
    previous = block;
  }
}

ExpertUse expert_use(nn::Module& model) {
  ExpertUse total;
  for (const auto& named : model.named_modules())
    if (const auto* block = dynamic_cast<const SparseMoeBlock*>(named.module)) total += block->use();
  return total;
}

}  // namespace ferry::models
