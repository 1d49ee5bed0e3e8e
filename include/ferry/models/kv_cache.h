// KvCache: the keys and values of every attention layer for the tokens seen so far — transformers' DynamicCache.
//
// Legend: T = new tokens, S = tokens held (past + new), Hkv = key/value heads, D = head_dim.
//
// It travels through forwards as an opaque nn::Object under the named argument "past_key_values", so device-moving
// hooks leave it alone (Accelerate's skip_keys=["past_key_values"]); each layer's K/V live on that layer's
// execution device, chosen by the first update (the device the new keys arrive on). A layer's storage grows by
// appending; capacity doubles so decoding reallocates O(log S) times, and reserve() removes even that.
//
// Deliberately unlike DynamicCache: sliding-window layers keep every token (the attention op masks the old ones),
// trading memory for one code path; batch size is 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"
#include "ferry/nn/value.h"

namespace ferry::models {

/// Not synchronised: one generation at a time uses a cache.
///
///   auto cache = model->make_cache();
///   Tensor logits = model->logits(prompt_ids, cache);          // prefill: S = prompt length
///   logits = model->logits(next_id, cache, /*logits_to_keep=*/1); // decode: S grows by one
class KvCache {
 public:
  /// num_layers slots; `dtype` is the storage type of keys and values (f32, or f16/bf16 to halve the memory —
  /// ops::attention reads them directly).
  explicit KvCache(int64_t num_layers, DType dtype = DType::F32);

  /// Appends k, v [T, Hkv, D] (f32) for `layer` and returns views of all keys and values [S, Hkv, D].
  /// The first update of a layer allocates on k's device; later updates must arrive there too (ferry::Error naming
  /// the layer and both devices otherwise), as must v. Shapes must agree with the earlier updates.
  /// HF: DynamicCache.update(key_states, value_states, layer_idx)
  std::pair<Tensor, Tensor> update(int64_t layer, const Tensor& k, const Tensor& v);

  /// Tokens held by `layer` (0 before its first update). HF: get_seq_length(layer_idx)
  int64_t seq_length(int64_t layer = 0) const;
  int64_t num_layers() const noexcept { return static_cast<int64_t>(layers_.size()); }
  DType dtype() const noexcept { return dtype_; }
  /// The device `layer`'s tensors live on; nullopt before its first update.
  std::optional<Device> device(int64_t layer) const;

  /// Makes every later allocation hold at least `tokens` tokens, so a generation up to that length never
  /// reallocates. Layers already allocated grow at their next update if they are smaller.
  void reserve(int64_t tokens);
  /// Keeps the first `length` tokens of every layer (a longer length is a no-op). HF: DynamicCache.crop
  void crop(int64_t length);
  /// Forgets every token and frees the storage.
  void reset();
  /// Bytes allocated for keys and values over all layers (capacity, not just the tokens held).
  std::size_t nbytes() const;

 private:
  struct Layer {
    Tensor keys, values;  // [capacity, Hkv, D]
    int64_t length = 0;
  };
  void grow(Layer& layer, int64_t needed, const Tensor& like, int64_t index);

  std::vector<Layer> layers_;
  DType dtype_;
  int64_t reserved_ = 0;
};

/// Bytes one token adds to one layer's cache: keys and values, 2 · Hkv · D · sizeof(dtype).
int64_t kv_cache_bytes_per_token(int64_t num_key_value_heads, int64_t head_dim, DType dtype);

/// The cache as the Value passed under "past_key_values".
nn::Value cache_value(std::shared_ptr<KvCache> cache);
/// The cache given as "past_key_values" in `args`, or nullptr when none (or none-valued) was given. Throws
/// ferry::Error when the argument holds something else; `where` names the module.
std::shared_ptr<KvCache> cache_from_args(const nn::Args& args, std::string_view where);

}  // namespace ferry::models
