// Pieces the blocked GEMM drivers share (gemm.cc on f32 panels, quant_gemm.cc on quantized strips): 64-byte aligned
// scratch arrays and the row prefetcher that pulls the next weight block towards the cache.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace ferry::ops::cpu {

struct AlignedFree {
  void operator()(void* p) const noexcept { std::free(p); }
};
template <class T>
using AlignedArray = std::unique_ptr<T[], AlignedFree>;

/// n elements of T, 64-byte aligned (at least one cache line), uninitialised. Throws std::bad_alloc.
template <class T>
AlignedArray<T> aligned_array(std::size_t n) {
  const std::size_t bytes = std::max<std::size_t>((n * sizeof(T) + 63) / 64 * 64, 64);
  auto* p = static_cast<T*>(std::aligned_alloc(64, bytes));
  if (!p) throw std::bad_alloc();
  return AlignedArray<T>(p);
}

/// Pulls `block_bytes` of each of the weight rows [n0, min(n0 + nc, N)) — starting `offset_bytes` into each row of
/// `row_bytes` — towards the cache, one row per step(): the rows are far apart in memory, so the hardware prefetcher
/// does not see the next block coming. A default-constructed one does nothing.
class RowPrefetcher {
 public:
  RowPrefetcher() = default;
  RowPrefetcher(const void* w, std::size_t row_bytes, std::size_t offset_bytes, std::size_t block_bytes, int64_t N,
                int64_t n0, int64_t nc)
      : base_(static_cast<const char*>(w) + offset_bytes), row_bytes_(row_bytes), bytes_(block_bytes), n_(n0),
        end_(std::min(n0 + nc, N)) {}
  bool step() {
    if (n_ >= end_ || bytes_ == 0) return false;
    const char* row = base_ + static_cast<std::size_t>(n_++) * row_bytes_;
    for (std::size_t off = 0; off < bytes_; off += 64) __builtin_prefetch(row + off, 0, 2);
    __builtin_prefetch(row + bytes_ - 1, 0, 2);
    return true;
  }

 private:
  const char* base_ = nullptr;
  std::size_t row_bytes_ = 0, bytes_ = 0;
  int64_t n_ = 0, end_ = 0;
};

}  // namespace ferry::ops::cpu
