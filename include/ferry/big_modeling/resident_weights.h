// Resident cpu weights and the kernel's reclaim. A checkpoint loaded zero-copy leaves the cpu-placed weights as
// views of the mapped safetensors files: clean file pages, which the kernel may drop under memory pressure and read
// back from disk on the next forward (seen here: a reclaim daemon paged out a model in use and halved decode speed).
// When RAM is short that is the wrong trade, so these two calls give llama.cpp's --no-mmap and --mlock:
//
//   copy_mapped_weights(model);   // views -> anonymous host memory (2 MiB-aligned, transparent huge pages)
//   lock_weights_in_ram(model);   // mlock: never paged out
//
// No Accelerate counterpart (PyTorch's safetensors loading copies; Accelerate keeps what it is given).
#pragma once

#include <cstddef>
#include <string>

#include "ferry/nn/module.h"

namespace ferry {

/// Copies every cpu parameter and buffer of `model` that views a mapped file into memory of its own (anonymous,
/// counted in memory_stats(cpu)). Tied tensors are copied once and stay tied. Returns the bytes copied.
/// llama.cpp: --no-mmap.
std::size_t copy_mapped_weights(nn::Module& model);

struct LockReport {
  std::size_t locked_bytes = 0;
  std::string error;  ///< empty when every range was locked; else why not and what to do (RLIMIT_MEMLOCK)
};

/// mlock()s the memory of every cpu parameter and buffer of `model` (mapped views fault their pages in first), so
/// the kernel never pages it out. Never throws: a refused lock (RLIMIT_MEMLOCK, no CAP_IPC_LOCK) is reported.
/// llama.cpp: --mlock.
LockReport lock_weights_in_ram(const nn::Module& model);

}  // namespace ferry
