// CachingAllocator: size-class pools over a raw allocator, so a forward never pays for cudaMalloc/cudaFree (which
// also synchronise the device). PyTorch's CUDACachingAllocator is the model; this one is deliberately simpler:
// exact size classes, no block splitting, no per-stream pools (ferry computes on one stream per device and makes
// its copy stream wait for the compute work queued before each copy, see cuda_backend.cc).
//
// Size classes: up to 1 MiB a multiple of 512 B; up to 256 MiB a multiple of 2 MiB; above, of 32 MiB. A freed
// block goes back to its class's free list; an allocation takes a free block of its class or asks the raw
// allocator. When the raw allocator fails, every cached block is released and the request is retried once; a
// second failure returns nullptr (the backend turns that into ferry::Error naming device, request and free bytes).
//
// The transformer layers of a model repeat the same shapes, so after the first forward every allocation is a hit:
// tests check that 100 forwards do not grow the raw allocations. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ferry {

class CachingAllocator {
 public:
  using RawAlloc = std::function<void*(std::size_t)>;  // nullptr when out of memory
  using RawFree = std::function<void(void*)>;

  struct Stats {
    std::size_t in_use = 0;        // bytes of blocks handed out (rounded sizes)
    std::size_t cached = 0;        // bytes of free blocks kept for reuse
    std::size_t peak_reserved = 0; // highest in_use + cached
    uint64_t raw_allocs = 0;       // calls to the raw allocator that succeeded
    uint64_t raw_frees = 0;
    uint64_t hits = 0;             // allocations served from the cache
  };

  CachingAllocator(RawAlloc raw_alloc, RawFree raw_free);
  /// Releases every cached block (blocks still in use are the caller's leak).
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// A block of at least n bytes (n == 0 counts as 1), or nullptr when the raw allocator fails even after the
  /// cache was emptied.
  void* allocate(std::size_t n);
  /// Returns a block from allocate() to its pool. Unknown pointers are ignored (nullptr too).
  void deallocate(void* p) noexcept;
  /// Hands every cached block back to the raw allocator. Accelerate/torch: torch.cuda.empty_cache().
  void empty_cache() noexcept;

  Stats stats() const;
  /// The size class n is served from.
  static std::size_t round_size(std::size_t n) noexcept;

 private:
  void release_cached_locked() noexcept;

  RawAlloc raw_alloc_;
  RawFree raw_free_;
  mutable std::mutex mu_;
  std::map<std::size_t, std::vector<void*>> free_;     // size class -> free blocks
  std::unordered_map<void*, std::size_t> live_;        // block -> size class
  Stats stats_;
};

}  // namespace ferry
