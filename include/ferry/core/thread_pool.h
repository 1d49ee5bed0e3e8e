// A small fixed thread pool sized to the machine (FERRY_NUM_THREADS overrides), for data-parallel kernels.
//
// parallel_for splits [begin, end) into chunks of at least `grain` and runs `fn(chunk_begin, chunk_end)` on
// the pool and the calling thread; it returns when every chunk is done. Calls from inside a pool task run
// inline (no nested parallelism, no deadlock). Exceptions thrown by `fn` are rethrown in the caller.
#pragma once

#include <cstdint>
#include <functional>

namespace ferry {

/// Threads parallel_for uses (pool workers + the caller). Default: hardware threads, or FERRY_NUM_THREADS.
int num_threads();
/// Resizes the pool (n >= 1). Not to be called while a parallel_for runs.
void set_num_threads(int n);

void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace ferry
