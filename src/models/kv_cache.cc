// KvCache: per-layer key/value storage that grows by appending (transformers' DynamicCache), allocated on the
// device the layer's keys first arrive on.
#include "ferry/models/kv_cache.h"

#include <algorithm>
#include <string>

#include "ferry/core/error.h"
#include "ferry/ops/attention.h"

namespace ferry::models {

namespace {

// The smallest allocation: a short prompt followed by a few decode steps should not reallocate at every token.
constexpr int64_t kMinCapacity = 16;

std::string layer_name(int64_t i) { return "KvCache layer " + std::to_string(i); }

}  // namespace

KvCache::KvCache(int64_t num_layers, DType dtype) : layers_(), dtype_(dtype) {
  if (num_layers < 0) throw Error("negative number of layers: " + std::to_string(num_layers), "KvCache");
  if (!is_floating_point(dtype) || is_fp8(dtype))
    throw Error("cache dtype must be f32, f16 or bf16, got " + std::string(dtype_name(dtype)), "KvCache");
  layers_.resize(static_cast<std::size_t>(num_layers));
}

void KvCache::grow(Layer& layer, int64_t needed, const Tensor& like, int64_t index) {
  const int64_t old_capacity = layer.keys.defined() ? layer.keys.size(0) : 0;
  const int64_t capacity = std::max({needed, 2 * old_capacity, reserved_, kMinCapacity});
  const Shape shape = {capacity, like.size(1), like.size(2)};
  Tensor keys, values;
  try {
    keys = Tensor::empty(shape, dtype_, like.device());
    values = Tensor::empty(shape, dtype_, like.device());
  } catch (const Error& e) {
    throw e.with_context(layer_name(index) + " (growing to " + std::to_string(capacity) + " tokens)");
  }
  if (layer.length > 0) {
    keys.slice(0, layer.length).copy_from(layer.keys.slice(0, layer.length));
    values.slice(0, layer.length).copy_from(layer.values.slice(0, layer.length));
  }
  layer.keys = std::move(keys);
  layer.values = std::move(values);
}

std::pair<Tensor, Tensor> KvCache::update(int64_t layer_index, const Tensor& k, const Tensor& v) {
  if (layer_index < 0 || layer_index >= num_layers())
    throw Error("layer " + std::to_string(layer_index) + " out of range: the cache has " +
                    std::to_string(num_layers()) + " layers",
                "KvCache", "Make the cache with the model's make_cache().");
  const std::string where = layer_name(layer_index);
  if (k.dim() != 3 || k.shape() != v.shape())
    throw Error("keys " + shape_str(k.shape()) + " and values " + shape_str(v.shape()) +
                    " must both be [T, kv_heads, head_dim]",
                where);
  if (k.device() != v.device())
    throw Error("keys on " + k.device().str() + " but values on " + v.device().str(), where);
  Layer& layer = layers_[static_cast<std::size_t>(layer_index)];
  if (layer.keys.defined()) {
    if (layer.keys.device() != k.device())
      throw Error("keys arrive on " + k.device().str() + " but this layer's cache lives on " +
                      layer.keys.device().str(),
                  where, "A layer must run on one device for a whole generation; start a new cache after re-dispatching.");
    if (layer.keys.size(1) != k.size(1) || layer.keys.size(2) != k.size(2))
      throw Error("keys " + shape_str(k.shape()) + " do not match the cached [S, " + std::to_string(layer.keys.size(1)) +
                      ", " + std::to_string(layer.keys.size(2)) + "]",
                  where);
  }
  const int64_t t = k.size(0);
  const int64_t needed = layer.length + t;
  if (!layer.keys.defined() || needed > layer.keys.size(0) || reserved_ > layer.keys.size(0))
    grow(layer, needed, k, layer_index);
  // copy_from converts f32 activations to the cache dtype.
  layer.keys.slice(layer.length, needed).copy_from(k);
  layer.values.slice(layer.length, needed).copy_from(v);
  layer.length = needed;
  return {layer.keys.slice(0, needed), layer.values.slice(0, needed)};
}

int64_t KvCache::seq_length(int64_t layer) const {
  if (layer < 0 || layer >= num_layers()) return 0;
  return layers_[static_cast<std::size_t>(layer)].length;
}

int64_t KvCache::seq_length() const {
  int64_t most = 0;
  for (const Layer& l : layers_) most = std::max(most, l.length);
  return most;
}

std::optional<Device> KvCache::device(int64_t layer) const {
  if (layer < 0 || layer >= num_layers()) return std::nullopt;
  const Layer& l = layers_[static_cast<std::size_t>(layer)];
  if (!l.keys.defined()) return std::nullopt;
  return l.keys.device();
}

void KvCache::reserve(int64_t tokens) {
  if (tokens < 0) throw Error("cannot reserve a negative number of tokens: " + std::to_string(tokens), "KvCache");
  reserved_ = std::max(reserved_, tokens);
}

void KvCache::crop(int64_t length) {
  if (length < 0) throw Error("cannot crop to a negative length: " + std::to_string(length), "KvCache");
  for (Layer& l : layers_) l.length = std::min(l.length, length);
}

void KvCache::reset() {
  for (Layer& l : layers_) l = Layer{};
}

std::size_t KvCache::nbytes() const {
  std::size_t n = 0;
  for (const Layer& l : layers_) {
    if (l.keys.defined()) n += l.keys.nbytes() + l.values.nbytes();
  }
  return n;
}

KvCacheBatch::KvCacheBatch(std::vector<Sequence> sequences) : sequences_(std::move(sequences)), offsets_{0} {
  if (sequences_.empty()) throw Error("a batch needs at least one sequence", "KvCacheBatch");
  for (std::size_t i = 0; i < sequences_.size(); ++i) {
    const Sequence& s = sequences_[i];
    const std::string where = "KvCacheBatch sequence " + std::to_string(i);
    if (!s.cache) throw Error("has no cache", where, "Give every sequence its own model->make_cache().");
    if (s.tokens < 1) throw Error("has " + std::to_string(s.tokens) + " new tokens; each needs at least one", where);
    for (std::size_t j = 0; j < i; ++j)
      if (sequences_[j].cache == s.cache)
        throw Error("shares its cache with sequence " + std::to_string(j), where,
                    "Each sequence needs its own KvCache.");
    offsets_.push_back(offsets_.back() + s.tokens);
  }
}

nn::Value batch_value(std::shared_ptr<KvCacheBatch> batch) {
  if (!batch) return nn::Value();
  return nn::Object::make(std::move(batch), "KvCacheBatch");
}

std::shared_ptr<KvCacheBatch> batch_from_args(const nn::Args& args) {
  const nn::Value* v = args.kwarg("past_key_values");
  if (v == nullptr || !v->is_object() || !v->object().holds<KvCacheBatch>()) return nullptr;
  return v->object().get<KvCacheBatch>();
}

Tensor cached_attention(const nn::Args& args, std::string_view where, int64_t layer, const Tensor& q, const Tensor& k,
                        const Tensor& v, float scale, int64_t sliding_window, float softcap) {
  return cached_attention_with(args, where, layer, q, k, v,
                               [&](const Tensor& qs, const Tensor& keys, const Tensor& values, int64_t q_offset) {
                                 return ops::attention(qs, keys, values, q_offset, scale, sliding_window, softcap);
                               });
}

Tensor cached_attention_with(const nn::Args& args, std::string_view where, int64_t layer, const Tensor& q,
                             const Tensor& k, const Tensor& v, const AttendFn& attend) {
  const auto batch = batch_from_args(args);
  if (!batch) {
    // keys, values: [S, Hkv, D]; the new queries sit at cache positions S - T .. S - 1.
    auto [keys, values] = cache_from_args(args, where)->update(layer, k, v);
    return attend(q, keys, values, keys.size(0) - q.size(0));
  }
  const int64_t t = q.size(0);
  if (batch->total_tokens() != t)
    throw Error("the batch has " + std::to_string(batch->total_tokens()) + " token rows but the layer got " +
                    std::to_string(t),
                std::string(where), "Build the KvCacheBatch from the same sequences as input_ids.");
  if (batch->size() == 1) {
    auto [keys, values] = (*batch)[0].cache->update(layer, k, v);
    return attend(q, keys, values, keys.size(0) - t);
  }
  Tensor out;
  for (int64_t i = 0; i < batch->size(); ++i) {
    const int64_t a = batch->offset(i), b = a + (*batch)[i].tokens;
    auto [keys, values] = (*batch)[i].cache->update(layer, k.slice(a, b), v.slice(a, b));
    Tensor o = attend(q.slice(a, b), keys, values, keys.size(0) - (b - a));
    if (!out.defined()) out = Tensor::empty({t, o.size(1), o.size(2)}, DType::F32, o.device());
    out.slice(a, b).copy_from(o);
  }
  return out;
}

int64_t kv_cache_bytes_per_token(int64_t num_key_value_heads, int64_t head_dim, DType dtype) {
  return 2 * num_key_value_heads * head_dim * static_cast<int64_t>(dtype_size(dtype));
}

nn::Value cache_value(std::shared_ptr<KvCache> cache) {
  if (!cache) return nn::Value();
  return nn::Object::make(std::move(cache), "KvCache");
}

std::shared_ptr<KvCache> cache_from_args(const nn::Args& args, std::string_view where) {
  const nn::Value* v = args.kwarg("past_key_values");
  if (v == nullptr || v->is_none()) return nullptr;
  if (!v->is_object() || !v->object().holds<KvCache>())
    throw Error("\"past_key_values\" must be a KvCache, got " + v->describe(), std::string(where),
                "Pass the cache made by the model's make_cache(), or a KvCacheBatch of them.");
  return v->object().get<KvCache>();
}

}  // namespace ferry::models
