// What a run's disk reads cost, per token (issue 41): time the forward waited for reads, time it computed, reads
// that overlapped the compute, bytes read, and the GB/s achieved against the disk's O_DIRECT bound (cached per
// device: io/disk_bandwidth.h); with the prefetch depth in use and why. `ferry generate` prints it after the run and
// puts it in --json; `ferry bench` prints it after the tg rows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ferry/io/staged_reader.h"
#include "ferry/models/moe.h"
#include "run_model.h"

namespace ferry::cli {

/// Bytes this process has read from storage so far (/proc/self/io read_bytes: page-cache misses and direct reads).
std::uint64_t process_disk_read_bytes();

/// The counters before a run, to report the run alone.
struct DiskIoMark {
  io::StagedReaderStats reader;
  io::WeightsCacheStats experts;
  models::ExpertUse expert_use;
  std::uint64_t process_read_bytes = 0;
};
DiskIoMark disk_io_mark(const LoadedModel& lm);

struct DiskIoReport {
  bool on_disk = false;  ///< the plan puts weights on disk (else nothing below is set)
  bool direct = false;   ///< read by the StagedReader (else through the page cache)
  bool io_uring = false, o_direct = false;
  double tokens = 0;
  double bytes_per_token = 0;  ///< every forward's reads (the prompt's included) over the generated tokens
  /// The decode alone: bytes read after the first token over the tokens after it (a prompt's forward reads far
  /// more, most of all in a mixture of experts, where its tokens route to most experts). Set by the caller.
  std::optional<double> decode_bytes_per_token;
  /// Direct reads only (the page cache's waits are page faults nobody counts): per token, the time the forward
  /// waited for bytes, the rest of its time (computing), and the time reads were in flight while it computed.
  std::optional<double> wait_s, compute_s, overlap_s;
  double gb_per_s = 0;                     ///< direct: while reads were in flight; mmap: over the run
  double reading_s = 0;                    ///< direct: seconds reads were in flight
  std::optional<io::DiskBandwidth> bound;  ///< the disk's O_DIRECT bound, when measured
  std::size_t staging_peak = 0;
  /// Direct: tensors taken, those whose read a prefetch had started, and prefetched reads dropped unused (read for
  /// nothing: each is read again when it is needed).
  std::uint64_t tensors = 0, prefetched = 0, evicted = 0;
  int prefetch_setting = 0;  ///< kPrefetchAuto, or the depth asked for
  PrefetchStatus prefetch;   ///< what the prefetcher does now (depth 0 and no reason without one)
  /// Mixtures of experts with experts on disk: the expert cache over the run (hits and misses are expert tensors).
  struct ExpertCacheRun {
    std::uint64_t hits = 0, misses = 0, evictions = 0;
    std::uint64_t kept = 0;             ///< misses kept in the buffer they were read into (direct reads: no copy)
    double missed_bytes_per_token = 0;  ///< read from disk for experts the cache did not hold
    std::size_t capacity = 0, held = 0;
    /// Reading ahead by guessing (FromPretrainedOptions::guess_experts): experts routed, guessed a layer ahead, and
    /// the guesses that were routed.
    std::uint64_t routed = 0, guessed = 0, guessed_routed = 0;
  };
  std::optional<ExpertCacheRun> expert_cache;
};

/// The run since `before`: `tokens` forwards taking `seconds`.
DiskIoReport disk_io_report(const LoadedModel& lm, const DiskIoMark& before, std::size_t tokens, double seconds);

/// "disk io: direct (io_uring, O_DIRECT), per token: 61.2 MiB read, 0.41 s waiting for reads, 0.62 s computing,
/// 0.38 s of reads overlapped; 1.52 GB/s while reading, 0.80 of the disk's O_DIRECT bound (1.90 GB/s); staging peak
/// 48 MiB" and, on a second line, "prefetch auto: depth 2 (...why)"; "" when nothing is on disk.
std::string disk_io_text(const DiskIoReport& r);
/// The same for --json (null when nothing is on disk).
nlohmann::json disk_io_json(const DiskIoReport& r);

}  // namespace ferry::cli
