// The forward contract every causal LM shares: parsing input_ids / past_key_values / position_ids /
// logits_to_keep, the cache factory and the logits() shorthand.
#include "ferry/models/causal_lm.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/models/pipeline.h"
#include "ferry/nn/module_tensors.h"

namespace ferry::models {

namespace {

// A decoder-only sequence's state: its KV cache (and, on rank 0 of a pipeline, its id there: the other ranks hold
// their layers' part of it).
struct CausalState final : SequenceState {
  std::shared_ptr<KvCache> cache;
  std::shared_ptr<PipelineLeader> leader;
  int64_t id = -1;
  ~CausalState() override {
    if (leader) leader->dropped(id);
  }
  int64_t length() const override { return cache->seq_length(); }
  void crop(int64_t length) override {
    if (leader && length < cache->seq_length()) leader->cropped(id, length);
    cache->crop(length);
  }
};

std::shared_ptr<KvCache> cache_of(const StepRow& row) {
  auto* s = dynamic_cast<CausalState*>(row.state.get());
  if (s == nullptr)
    throw Error("a sequence state from another kind of model", "CausalLM::forward_step",
                "start each sequence with this model's start_sequence()");
  return s->cache;
}

}  // namespace

CausalLM::CausalLM(CausalLMInfo info) : LanguageModel(info), info_(std::move(info)) {}

std::shared_ptr<KvCache> CausalLM::make_cache(DType dtype) const {
  return std::make_shared<KvCache>(info_.num_hidden_layers(), dtype);
}

Tensor CausalLM::logits(const Tensor& input_ids, const std::shared_ptr<KvCache>& cache, int64_t logits_to_keep) {
  nn::Args args{ids_on_model_device(*this, input_ids)};
  if (cache) args.with("past_key_values", cache_value(cache));
  if (logits_to_keep != 0) args.with("logits_to_keep", logits_to_keep);
  nn::Value out = (*this)(std::move(args));
  return out.dict().at("logits").tensor();
}

Tensor CausalLM::logits(const Tensor& input_ids, const KvCacheBatch& batch, int64_t logits_to_keep) {
  nn::Args args{ids_on_model_device(*this, input_ids)};
  args.with("past_key_values", batch_value(std::make_shared<KvCacheBatch>(batch)));
  if (logits_to_keep != 0) args.with("logits_to_keep", logits_to_keep);
  nn::Value out = (*this)(std::move(args));
  return out.dict().at("logits").tensor();
}

SequenceStart CausalLM::start_sequence(std::span<const int64_t> prompt_ids, DType kv_dtype, int64_t reserve_tokens) {
  auto state = std::make_shared<CausalState>();
  state->cache = make_cache(kv_dtype);
  if (reserve_tokens > 0) state->cache->reserve(reserve_tokens);  // one allocation per layer
  if (pipeline_leader()) {
    state->leader = pipeline_leader();
    state->id = state->leader->started(prompt_ids, kv_dtype, reserve_tokens);
  }
  return {std::move(state), first_input(prompt_ids)};
}

Tensor CausalLM::forward_step(const Tensor& input_ids, std::span<const StepRow> rows, int64_t logits_to_keep) {
  if (pipeline_leader()) {  // rank 0 of a pipeline: micro-batches, each sent to the other ranks and run here
    std::vector<int64_t> ids;
    for (const StepRow& row : rows) {
      auto* s = dynamic_cast<CausalState*>(row.state.get());
      ids.push_back(s != nullptr ? s->id : -1);
    }
    return pipeline_leader()->forward(input_ids, rows, ids, logits_to_keep,
                                      [this](const Tensor& part, std::span<const StepRow> part_rows, int64_t keep) {
                                        return local_step(part, part_rows, keep);
                                      });
  }
  return local_step(input_ids, rows, logits_to_keep);
}

Tensor CausalLM::local_step(const Tensor& input_ids, std::span<const StepRow> rows, int64_t logits_to_keep) {
  if (rows.size() == 1) return logits(input_ids, cache_of(rows[0]), logits_to_keep);
  std::vector<KvCacheBatch::Sequence> sequences;
  sequences.reserve(rows.size());
  for (const StepRow& row : rows) sequences.push_back({cache_of(row), row.tokens});
  return logits(input_ids, KvCacheBatch(std::move(sequences)), logits_to_keep);
}

CausalLMInputs parse_causal_lm_inputs(const nn::Args& args, int64_t num_layers, std::string_view where) {
  const std::string w(where);
  const Tensor* ids = args.tensor_arg(0, "input_ids");
  if (ids == nullptr) throw Error("forward needs input_ids (positional 0 or \"input_ids\")", w);
  if (ids->dtype() != DType::I64)
    throw Error("input_ids must be i64, got " + std::string(dtype_name(ids->dtype())), w);
  // Batch size 1: [1, T] is accepted as [T].
  if (!(ids->dim() == 1 || (ids->dim() == 2 && ids->size(0) == 1)))
    throw Error("input_ids must be [T] or [1, T], got " + shape_str(ids->shape()), w,
                "Batch sequences by passing their rows back to back with a KvCacheBatch (no padding).");
  CausalLMInputs in;
  in.input_ids = ids->reshape({-1});
  const int64_t t = in.input_ids.size(0);
  if (t == 0) throw Error("input_ids is empty", w, "Give at least one token.");

  auto check_layers = [&](const KvCache& cache) {
    if (cache.num_layers() != num_layers)
      throw Error("the KvCache has " + std::to_string(cache.num_layers()) + " layers but the model has " +
                      std::to_string(num_layers),
                  w, "Make the cache with this model's make_cache().");
  };
  // Each sequence's first new position: its cache length.
  std::vector<int64_t> starts, lengths;
  if (auto batch = batch_from_args(args)) {
    if (batch->total_tokens() != t)
      throw Error("the KvCacheBatch holds " + std::to_string(batch->total_tokens()) + " new tokens but input_ids has " +
                      std::to_string(t),
                  w, "input_ids must hold every sequence's new tokens back to back, in batch order.");
    for (int64_t i = 0; i < batch->size(); ++i) {
      check_layers(*(*batch)[i].cache);
      starts.push_back((*batch)[i].cache->seq_length());
      lengths.push_back((*batch)[i].tokens);
    }
    in.cache = *args.kwarg("past_key_values");
  } else {
    std::shared_ptr<KvCache> cache = cache_from_args(args, where);
    if (!cache) cache = std::make_shared<KvCache>(num_layers);  // like HF's DynamicCache() when use_cache is on
    check_layers(*cache);
    starts.push_back(cache->seq_length());
    lengths.push_back(t);
    in.cache = cache_value(cache);
  }
  for (std::size_t i = 0; i < starts.size(); ++i) in.max_context = std::max(in.max_context, starts[i] + lengths[i]);

  const nn::Value* pos_value = args.kwarg("position_ids");
  if (pos_value != nullptr && !pos_value->is_none()) {
    const Tensor* pos = &pos_value->tensor();
    if (pos->dtype() != DType::I64 || pos->numel() != t)
      throw Error("position_ids must be i64 with one entry per input token (" + std::to_string(t) + "), got " +
                      pos->str(),
                  w);
    in.position_ids = pos->reshape({t});
  } else {
    std::vector<int64_t> positions;
    positions.reserve(static_cast<std::size_t>(t));
    for (std::size_t i = 0; i < starts.size(); ++i)
      for (int64_t p = 0; p < lengths[i]; ++p) positions.push_back(starts[i] + p);
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

CausalLMInfo model_layers_info(std::string architecture, std::string model_type, std::string block_class,
                               const DecoderSizes& s) {
  CausalLMInfo i;
  i.architecture = std::move(architecture);
  i.model_type = std::move(model_type);
  i.block_class = std::move(block_class);
  i.base_model_prefix = "model";
  i.layers_prefix = "model.layers";
  i.vocab_size = s.vocab_size;
  i.hidden_size = s.hidden_size;
  i.num_cached_layers = s.num_hidden_layers;
  i.num_attention_heads = s.num_attention_heads;
  i.num_key_value_heads = s.num_key_value_heads;
  i.head_dim = s.head_dim;
  i.max_position_embeddings = s.max_position_embeddings;
  i.tie_word_embeddings = s.tie_word_embeddings;
  return i;
}

nn::Value forward_through_head(nn::Module& body, nn::Module& head, const nn::Args& args, std::string_view where) {
  const int64_t logits_to_keep = logits_to_keep_arg(args, where);
  nn::Value out = body(args);
  Tensor hidden = slice_logits_to_keep(out.dict().at("last_hidden_state").tensor(), logits_to_keep, args);
  return nn::Dict{{"logits", head(hidden)}, {"past_key_values", out.dict().at("past_key_values")}};
}

Tensor slice_logits_to_keep(const Tensor& hidden, int64_t logits_to_keep) {
  const int64_t t = hidden.size(0);
  if (logits_to_keep <= 0 || logits_to_keep >= t) return hidden;
  return hidden.slice(t - logits_to_keep, t);
}

Tensor slice_logits_to_keep(const Tensor& hidden, int64_t logits_to_keep, const nn::Args& args) {
  const auto batch = batch_from_args(args);
  if (!batch || batch->size() == 1) return slice_logits_to_keep(hidden, logits_to_keep);
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < batch->size(); ++i) tokens.push_back((*batch)[i].tokens);
  return keep_last_rows_per_sequence(hidden, tokens, logits_to_keep);
}

Tensor keep_last_rows_per_sequence(const Tensor& hidden, const std::vector<int64_t>& tokens, int64_t logits_to_keep) {
  if (logits_to_keep <= 0) return hidden;
  int64_t rows = 0;
  for (int64_t t : tokens) rows += std::min(logits_to_keep, t);
  if (rows == hidden.size(0)) return hidden;
  Tensor out = Tensor::empty({rows, hidden.size(1)}, hidden.dtype(), hidden.device());
  int64_t r = 0, end = 0;
  for (int64_t t : tokens) {
    end += t;
    const int64_t n = std::min(logits_to_keep, t);
    out.slice(r, r + n).copy_from(hidden.slice(end - n, end));
    r += n;
  }
  return out;
}

const Tensor& required_tensor_kwarg(const nn::Args& args, std::string_view name, std::string_view where) {
  const nn::Value* v = args.kwarg(name);
  if (v == nullptr || !v->is_tensor())
    throw Error("forward needs the tensor argument \"" + std::string(name) + "\"", std::string(where),
                "Call the decoder layers through their model's forward, which supplies it.");
  return v->tensor();
}

std::shared_ptr<nn::Linear> register_lm_head(nn::Module& owner, const nn::Module& embedding, int64_t in_features,
                                             int64_t vocab_size, bool tied, DType dtype, bool bias) {
  auto head = owner.register_module("lm_head", std::make_shared<nn::Linear>(in_features, vocab_size, bias, dtype));
  if (tied) head->register_parameter("weight", embedding.parameter_slot("weight"));
  return head;
}

}  // namespace ferry::models
