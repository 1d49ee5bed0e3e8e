// ferry bench --disk: the O_DIRECT read bandwidth of the disk holding a model, over request size × queue depth,
// measured again and cached for the runs (io/disk_bandwidth.h).
#pragma once

#include <filesystem>

namespace ferry::cli {

/// Measures on `model`'s weight files (a folder or a GGUF file), prints the grid (a table, or JSON) and caches it.
/// Throws ferry::Error with what to do when the files cannot be measured.
void bench_disk(const std::filesystem::path& model, bool json);

}  // namespace ferry::cli
