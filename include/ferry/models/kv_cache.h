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
// trading memory for one code path; one cache holds one sequence (KvCacheBatch groups several for one forward).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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
  int64_t seq_length(int64_t layer) const;
  /// Tokens held by the sequence: the most any layer holds (on a rank of a pipeline only its own layers hold any).
  /// HF: get_seq_length()
  int64_t seq_length() const;
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

/// Several sequences in one forward (batched decoding): the rows of input_ids are each sequence's new tokens, back
/// to back in batch order, without padding; sequence i owns rows [offset(i), offset(i) + tokens(i)) and its own
/// KvCache, so sequences of any lengths share the linear layers while attention reads only their own keys.
/// Sequences may join or leave between forwards: a batch is rebuilt for every step. Passed as "past_key_values"
/// (batch_value()) in place of a single cache; every cache must have the model's number of layers.
/// (vLLM's flattened varlen batch; transformers pads a [B, T] batch instead.)
class KvCacheBatch {
 public:
  struct Sequence {
    std::shared_ptr<KvCache> cache;
    int64_t tokens = 0;  // new tokens of this sequence in this forward (≥ 1)
  };
  /// Throws ferry::Error for an empty batch, a null cache, tokens < 1 or the same cache twice.
  explicit KvCacheBatch(std::vector<Sequence> sequences);

  int64_t size() const noexcept { return static_cast<int64_t>(sequences_.size()); }
  const Sequence& operator[](int64_t i) const { return sequences_[static_cast<std::size_t>(i)]; }
  /// First row of sequence i in the forward's token rows.
  int64_t offset(int64_t i) const { return offsets_[static_cast<std::size_t>(i)]; }
  /// Rows of the whole batch: the sum of every sequence's tokens.
  int64_t total_tokens() const noexcept { return offsets_.back(); }

 private:
  std::vector<Sequence> sequences_;
  std::vector<int64_t> offsets_;  // size() + 1 prefix sums
};

/// The batch as the Value passed under "past_key_values".
nn::Value batch_value(std::shared_ptr<KvCacheBatch> batch);
/// The batch given as "past_key_values" in `args`, or nullptr when a single cache or nothing was given.
std::shared_ptr<KvCacheBatch> batch_from_args(const nn::Args& args);

/// One attention layer's cache step for either form of "past_key_values" in `args`: appends k, v [T, Hkv, D] to
/// the cache (or, for a KvCacheBatch, each sequence's rows to that sequence's cache) and runs ops::attention of
/// q [T, Hq, D] against the keys each query may see (softcap: ops::attention's score soft-capping, 0 for none).
/// Returns [T, Hq, Dv] f32. `where` names the module in errors.
Tensor cached_attention(const nn::Args& args, std::string_view where, int64_t layer, const Tensor& q, const Tensor& k,
                        const Tensor& v, float scale, int64_t sliding_window = 0, float softcap = 0.0f);

/// One sequence's attention for cached_attention_with: q [T_i, Hq, D] against all keys and values of that
/// sequence's cache [S_i, Hkv, D], the queries at cache positions q_offset .. S_i - 1. Returns [T_i, Hq, Dv] f32.
using AttendFn = std::function<Tensor(const Tensor& q, const Tensor& keys, const Tensor& values, int64_t q_offset)>;
/// cached_attention's cache step with the attention op given: `attend` runs once per sequence (once for a single
/// cache) after its keys are appended — for attention whose inputs depend on each sequence's length (BLOOM's ALiBi
/// bias over the positions 0 .. S_i - 1).
Tensor cached_attention_with(const nn::Args& args, std::string_view where, int64_t layer, const Tensor& q,
                             const Tensor& k, const Tensor& v, const AttendFn& attend);

/// Bytes one token adds to one layer's cache: keys and values, 2 · Hkv · D · sizeof(dtype).
int64_t kv_cache_bytes_per_token(int64_t num_key_value_heads, int64_t head_dim, DType dtype);

/// The cache as the Value passed under "past_key_values".
nn::Value cache_value(std::shared_ptr<KvCache> cache);
/// The cache given as "past_key_values" in `args`, or nullptr when none (or none-valued) was given. Throws
/// ferry::Error when the argument holds something else; `where` names the module.
std::shared_ptr<KvCache> cache_from_args(const nn::Args& args, std::string_view where);

}  // namespace ferry::models
