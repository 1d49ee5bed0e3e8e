// A Llama-shaped toy for end-to-end dispatch tests: embedding, N no-split blocks (RMSNorm + MLP with a
// residual), a final norm and an untied head. Names follow HF ("model.layers.3.mlp.up_proj.weight").
#pragma once

#include <memory>
#include <string>

#include "ferry/nn/containers.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/norm.h"
#include "ferry/ops/elementwise.h"

namespace ferry::test {

struct ToyMlp : nn::Module {
  std::shared_ptr<nn::Linear> up_proj, down_proj;
  explicit ToyMlp(int64_t d) {
    up_proj = register_module("up_proj", std::make_shared<nn::Linear>(d, 4 * d, false));
    down_proj = register_module("down_proj", std::make_shared<nn::Linear>(4 * d, d, false));
  }
  std::string type_name() const override { return "ToyMLP"; }
  nn::Value forward(const nn::Args& a) override { return (*down_proj)(ops::silu((*up_proj)(a[0].tensor()))); }
};

struct ToyBlock : nn::Module {
  std::shared_ptr<nn::RMSNorm> input_layernorm;
  std::shared_ptr<ToyMlp> mlp;
  explicit ToyBlock(int64_t d) {
    input_layernorm = register_module("input_layernorm", std::make_shared<nn::RMSNorm>(d));
    mlp = register_module("mlp", std::make_shared<ToyMlp>(d));
  }
  std::string type_name() const override { return "ToyDecoderLayer"; }
  nn::Value forward(const nn::Args& a) override {
    const Tensor& x = a[0].tensor();
    return ops::add(x, (*mlp)((*input_layernorm)(x)));
  }
};

struct ToyInner : nn::Module {
  std::shared_ptr<nn::Embedding> embed_tokens;
  std::shared_ptr<nn::ModuleList> layers;
  std::shared_ptr<nn::RMSNorm> norm;
  ToyInner(int64_t vocab, int64_t d, int n_layers) {
    embed_tokens = register_module("embed_tokens", std::make_shared<nn::Embedding>(vocab, d));
    std::vector<std::shared_ptr<nn::Module>> blocks;
    for (int i = 0; i < n_layers; ++i) blocks.push_back(std::make_shared<ToyBlock>(d));
    layers = register_module("layers", std::make_shared<nn::ModuleList>(blocks));
    norm = register_module("norm", std::make_shared<nn::RMSNorm>(d));
  }
  std::string type_name() const override { return "ToyModel"; }
  nn::Value forward(const nn::Args& a) override {
    Tensor h = (*embed_tokens)(a[0].tensor());
    for (const auto& layer : layers->children()) h = (*layer.module)(h);
    return (*norm)(h);
  }
};

struct ToyLlama : nn::Module {
  std::shared_ptr<ToyInner> model;
  std::shared_ptr<nn::Linear> lm_head;
  ToyLlama(int64_t vocab = 64, int64_t d = 32, int n_layers = 8) {
    model = register_module("model", std::make_shared<ToyInner>(vocab, d, n_layers));
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(d, vocab, false));
  }
  std::string type_name() const override { return "ToyForCausalLM"; }
  /// ids: [T] i64 -> logits [T, vocab] f32.
  nn::Value forward(const nn::Args& a) override { return (*lm_head)((*model)(a[0].tensor())); }
};

}  // namespace ferry::test
