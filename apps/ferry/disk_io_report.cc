// disk_io_report and its text and JSON (see disk_io_report.h).
#include "disk_io_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "ferry/big_modeling/max_memory.h"  // format_bytes

namespace ferry::cli {

std::uint64_t process_disk_read_bytes() {
  std::ifstream in("/proc/self/io");
  std::string key;
  std::uint64_t value = 0;
  while (in >> key >> value)
    if (key == "read_bytes:") return value;
  return 0;
}

DiskIoMark disk_io_mark(const LoadedModel& lm) {
  DiskIoMark m;
  if (lm.staged_reader) m.reader = lm.staged_reader->stats();
  if (lm.expert_cache) m.experts = lm.expert_cache->stats();
  if (lm.expert_cache && lm.model) m.expert_use = models::expert_use(*lm.model);
  m.process_read_bytes = process_disk_read_bytes();
  return m;
}

DiskIoReport disk_io_report(const LoadedModel& lm, const DiskIoMark& before, std::size_t tokens, double seconds) {
  DiskIoReport r;
  for (const auto& [name, d] : lm.plan.device_map) r.on_disk = r.on_disk || d.is_disk();
  if (!r.on_disk) return r;
  r.tokens = static_cast<double>(std::max<std::size_t>(tokens, 1));
  r.bound = lm.disk_bound;
  r.prefetch_setting = lm.prefetch_setting;
  if (lm.prefetcher) r.prefetch = lm.prefetcher->status();
  if (lm.expert_cache && lm.expert_cache->map) {
    const io::WeightsCacheStats s = lm.expert_cache->stats();
    r.expert_cache = DiskIoReport::ExpertCacheRun{
        .hits = s.hits - before.experts.hits,
        .misses = s.misses - before.experts.misses,
        .evictions = s.evictions - before.experts.evictions,
        .kept = s.kept - before.experts.kept,
        .missed_bytes_per_token = static_cast<double>(s.bytes_missed - before.experts.bytes_missed) / r.tokens,
        .capacity = s.capacity,
        .held = s.bytes};
    if (lm.model) {
      const models::ExpertUse u = models::expert_use(*lm.model);
      r.expert_cache->routed = u.calls - before.expert_use.calls;
      r.expert_cache->guessed = u.guessed - before.expert_use.guessed;
      r.expert_cache->guessed_routed = u.guessed_routed - before.expert_use.guessed_routed;
    }
  }
  if (!lm.staged_reader) {
    const std::uint64_t now = process_disk_read_bytes();
    const double bytes = static_cast<double>(now > before.process_read_bytes ? now - before.process_read_bytes : 0);
    r.bytes_per_token = bytes / r.tokens;
    r.gb_per_s = seconds > 0 ? bytes / seconds / 1e9 : 0;
    return r;
  }
  const io::StagedReaderStats s = lm.staged_reader->stats();
  r.direct = true;
  r.io_uring = s.io_uring;
  r.o_direct = s.direct;
  const double bytes = static_cast<double>(s.bytes_read - before.reader.bytes_read);
  const double wait = s.wait_seconds - before.reader.wait_seconds;
  const double reading = s.read_seconds - before.reader.read_seconds;
  r.bytes_per_token = bytes / r.tokens;
  r.wait_s = wait / r.tokens;
  r.compute_s = std::max(seconds - wait, 0.0) / r.tokens;
  r.overlap_s = std::max(reading - wait, 0.0) / r.tokens;  // reads in flight while nobody waited for them
  r.gb_per_s = reading > 0 ? bytes / reading / 1e9 : 0;
  r.reading_s = reading;
  r.staging_peak = s.pool_peak + s.overflow_peak;
  r.tensors = s.tensors - before.reader.tensors;
  r.prefetched = s.prefetched - before.reader.prefetched;
  r.evicted = s.evicted - before.reader.evicted;
  return r;
}

namespace {

std::string prefetch_text(const DiskIoReport& r) {
  if (r.prefetch_setting == 0) return "prefetch 0: each module's weights are read when it starts";
  if (!r.prefetch.self_tuning) return fmt::format("prefetch {}: modules read ahead", r.prefetch.depth);
  if (r.prefetch.reason.empty())
    return fmt::format("prefetch auto: depth {} (too few forwards to measure the others)", r.prefetch.depth);
  return fmt::format("prefetch auto: depth {} now; last choice {}", r.prefetch.depth, r.prefetch.reason);
}

}  // namespace

std::string disk_io_text(const DiskIoReport& r) {
  if (!r.on_disk) return "";
  std::string line;
  if (!r.direct) {
    line = fmt::format("disk io: mmap (page cache), per token: {} read from disk, {:.2f} GB/s over the run",
                       format_bytes(static_cast<int64_t>(r.bytes_per_token)), r.gb_per_s);
  } else {
    line = fmt::format(
        "disk io: direct ({}, {}), per token: {} read, {:.3f} s waiting for reads, {:.3f} s computing, "
        "{:.3f} s of reads overlapped; {:.2f} GB/s while reading",
        r.io_uring ? "io_uring" : "pread", r.o_direct ? "O_DIRECT" : "buffered: the filesystem refused O_DIRECT",
        format_bytes(static_cast<int64_t>(r.bytes_per_token)), *r.wait_s, *r.compute_s, *r.overlap_s, r.gb_per_s);
  }
  if (r.decode_bytes_per_token)
    line += fmt::format(" ({} per token after the prompt)",
                        format_bytes(static_cast<int64_t>(*r.decode_bytes_per_token)));
  if (r.bound)
    line += fmt::format(", {:.2f} of the disk's O_DIRECT bound ({:.2f} GB/s, {} {})",
                        r.gb_per_s / r.bound->best.gb_per_s, r.bound->best.gb_per_s, r.bound->device,
                        r.bound->measured_at);
  else if (r.direct) line += " (the disk's O_DIRECT bound: `ferry bench --disk -m MODEL` measures it)";
  if (r.direct) {
    line += fmt::format("; staging peak {}", format_bytes(static_cast<int64_t>(r.staging_peak)));
    if (r.evicted > 0)
      line += fmt::format("; {} of {} prefetched tensors dropped unused and read again", r.evicted,
                          r.prefetched + r.evicted);
  }
  if (r.expert_cache) {
    const auto& c = *r.expert_cache;
    const std::uint64_t looked = c.hits + c.misses;
    line += fmt::format(
        "\n  expert cache {} (LRU per layer, {} held): {} hits, {} misses ({:.0f} % hits, {} kept as read), {} "
        "evicted; {} per token read for missed experts",
        format_bytes(static_cast<int64_t>(c.capacity)), format_bytes(static_cast<int64_t>(c.held)), c.hits, c.misses,
        looked ? 100.0 * static_cast<double>(c.hits) / static_cast<double>(looked) : 0.0, c.kept, c.evictions,
        format_bytes(static_cast<int64_t>(c.missed_bytes_per_token)));
    if (c.guessed > 0)
      line += fmt::format("; the next layer's router guessed {:.0f} % of the routed experts ({} of {} guesses routed)",
                          c.routed ? 100.0 * static_cast<double>(c.guessed_routed) / static_cast<double>(c.routed)
                                   : 0.0,
                          c.guessed_routed, c.guessed);
  }
  return line + "\n  " + prefetch_text(r);
}

nlohmann::json disk_io_json(const DiskIoReport& r) {
  if (!r.on_disk) return nullptr;
  nlohmann::json j = {{"offload_io", r.direct ? "direct" : "mmap"},
                      {"tokens", r.tokens},
                      {"bytes_per_token", r.bytes_per_token},
                      {"gb_per_s", r.gb_per_s},
                      {"prefetch",
                       {{"setting", prefetch_name(r.prefetch_setting)},
                        {"depth", r.prefetch.depth},
                        {"reason", r.prefetch.reason},
                        {"probes", r.prefetch.probes}}}};
  j["bytes_read"] = r.bytes_per_token * r.tokens;
  if (r.decode_bytes_per_token) j["decode_bytes_per_token"] = *r.decode_bytes_per_token;
  if (r.direct) {
    j["read_s"] = r.reading_s;  // reads in flight
    j["wait_s"] = *r.wait_s * r.tokens;
    j["wait_s_per_token"] = *r.wait_s;
    j["compute_s_per_token"] = *r.compute_s;
    j["overlap_s_per_token"] = *r.overlap_s;
    j["io_uring"] = r.io_uring;
    j["o_direct"] = r.o_direct;
    j["staging_peak"] = r.staging_peak;
    j["tensors"] = r.tensors;
    j["prefetched"] = r.prefetched;
    j["evicted"] = r.evicted;
  }
  if (r.expert_cache)
    j["expert_cache"] = {{"capacity", r.expert_cache->capacity},
                         {"held", r.expert_cache->held},
                         {"hits", r.expert_cache->hits},
                         {"misses", r.expert_cache->misses},
                         {"evictions", r.expert_cache->evictions},
                         {"kept", r.expert_cache->kept},
                         {"missed_bytes_per_token", r.expert_cache->missed_bytes_per_token},
                         {"routed", r.expert_cache->routed},
                         {"guessed", r.expert_cache->guessed},
                         {"guessed_routed", r.expert_cache->guessed_routed}};
  if (r.bound) {
    j["bound_gb_per_s"] = r.bound->best.gb_per_s;
    j["fraction_of_bound"] = r.gb_per_s / r.bound->best.gb_per_s;
    j["bound_device"] = r.bound->device;
  }
  return j;
}

}  // namespace ferry::cli
