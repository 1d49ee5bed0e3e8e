// The forward contract every causal LM shares: parsing input_ids / past_key_values / position_ids /
// logits_to_keep, the cache factory and the logits() shorthand.
#include "ferry/models/causal_lm.h"

#include <numeric>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/nn/module_tensors.h"

namespace ferry::models {

int64_t CausalLMInfo::kv_cache_bytes_per_token(DType dtype) const {
  return models::kv_cache_bytes_per_token(num_key_value_heads, head_dim, dtype);
}

std::shared_ptr<KvCache> CausalLM::make_cache(DType dtype) const {
  return std::make_shared<KvCache>(info_.num_hidden_layers, dtype);
}

Tensor CausalLM::logits(const Tensor& input_ids, const std::shared_ptr<KvCache>& cache, int64_t logits_to_keep) {
  // A model moved whole onto an accelerator has no hook to bring the ids to it: they go where its first weight is,
  // as transformers' generate sends input_ids to model.device. (Dispatched models' hooks move them.)
  Tensor ids = input_ids;
  if (!hook())
    if (const auto d = nn::first_parameter_device(*this); d && d->is_accelerator() && ids.device() != *d)
      ids = ids.to(*d);
  nn::Args args{ids};
  if (cache) args.with("past_key_values", cache_value(cache));
  if (logits_to_keep != 0) args.with("logits_to_keep", logits_to_keep);
  nn::Value out = (*this)(std::move(args));
  return out.dict().at("logits").tensor();
}

CausalLMInputs parse_causal_lm_inputs(const nn::Args& args, int64_t num_layers, std::string_view where) {
  const std::string w(where);
  const Tensor* ids = args.tensor_arg(0, "input_ids");
  if (ids == nullptr) throw Error("forward needs input_ids (positional 0 or \"input_ids\")", w);
  if (ids->dtype() != DType::I64)
    throw Error("input_ids must be i64, got " + std::string(dtype_name(ids->dtype())), w);
  // Batch size 1: [1, T] is accepted as [T].
  if (!(ids->dim() == 1 || (ids->dim() == 2 && ids->size(0) == 1)))
    throw Error("input_ids must be [T] or [1, T], got " + shape_str(ids->shape()), w, "ferry runs batch size 1.");
  CausalLMInputs in;
  in.input_ids = ids->reshape({-1});
  const int64_t t = in.input_ids.size(0);
  if (t == 0) throw Error("input_ids is empty", w, "Give at least one token.");

  std::shared_ptr<KvCache> cache = cache_from_args(args, where);
  if (!cache) cache = std::make_shared<KvCache>(num_layers);  // like HF's DynamicCache() when use_cache is on
  if (cache->num_layers() != num_layers)
    throw Error("the KvCache has " + std::to_string(cache->num_layers()) + " layers but the model has " +
                    std::to_string(num_layers),
                w, "Make the cache with this model's make_cache().");
  in.cache = cache_value(cache);

  const nn::Value* pos_value = args.kwarg("position_ids");
  if (pos_value != nullptr && !pos_value->is_none()) {
    const Tensor* pos = &pos_value->tensor();
    if (pos->dtype() != DType::I64 || pos->numel() != t)
      throw Error("position_ids must be i64 with one entry per input token (" + std::to_string(t) + "), got " +
                      pos->str(),
                  w);
    in.position_ids = pos->reshape({t});
  } else {
    std::vector<int64_t> positions(static_cast<std::size_t>(t));
    std::iota(positions.begin(), positions.end(), cache->seq_length());
    // Created where the ids are, as transformers creates them on inputs_embeds.device.
    in.position_ids = Tensor::from_vector(positions, {t}).to(in.input_ids.device());
  }
  return in;
}

int64_t logits_to_keep_arg(const nn::Args& args, std::string_view where) {
  const nn::Value* v = args.kwarg("logits_to_keep");
  if (v == nullptr || v->is_none()) return 0;
  const int64_t n = v->to_int();
  if (n < 0) throw Error("logits_to_keep must be >= 0, got " + std::to_string(n), std::string(where));
  return n;
}

Tensor slice_logits_to_keep(const Tensor& hidden, int64_t logits_to_keep) {
  const int64_t t = hidden.size(0);
  if (logits_to_keep <= 0 || logits_to_keep >= t) return hidden;
  return hidden.slice(t - logits_to_keep, t);
}

const Tensor& required_tensor_kwarg(const nn::Args& args, std::string_view name, std::string_view where) {
  const nn::Value* v = args.kwarg(name);
  if (v == nullptr || !v->is_tensor())
    throw Error("forward needs the tensor argument \"" + std::string(name) + "\"", std::string(where),
                "Call the decoder layers through their model's forward, which supplies it.");
  return v->tensor();
}

}  // namespace ferry::models
