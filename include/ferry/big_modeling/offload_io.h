// How the disk part of a plan is read — a planning decision, taken before loading: through the page cache (mmap, as
// Accelerate does) or with O_DIRECT reads into a bounded staging pool (io/staged_reader.h), which is right when the
// disk part does not fit in what RAM can cache. resolve_offload_io (offload_plan.h) applies it to a device map.
#pragma once

#include <cstdint>
#include <string_view>

namespace ferry {

/// How offloaded (disk) weights are read. Auto: Direct when the disk-placed bytes exceed what RAM can cache, Mmap
/// when they fit (choose_offload_io).
enum class OffloadIo { Auto, Direct, Mmap };

/// "auto", "direct" or "mmap" (what --offload-io takes). Throws ferry::Error for anything else.
OffloadIo parse_offload_io(std::string_view text);
const char* to_string(OffloadIo io);

/// Auto's decision: Direct when `disk_bytes` > 0.8 × `cacheable` (what the page cache could keep,
/// cacheable_ram_bytes() in max_memory.h), else Mmap. Direct and Mmap are returned as they are.
OffloadIo choose_offload_io(OffloadIo requested, std::uint64_t disk_bytes, std::uint64_t cacheable);

}  // namespace ferry
