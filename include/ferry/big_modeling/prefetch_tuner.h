// PrefetchTuner: chooses how far the Prefetcher reads ahead from what the forwards measure (beyond Accelerate, which
// has no read-ahead). `--prefetch auto`.
//
// Reading ahead overlaps the next modules' disk reads with this module's compute. Whether that pays depends on the
// machine: on a disk-bound run it hides the compute behind the reads; on a CPU whose two cores the forward keeps
// busy, the reads' own CPU work (page cache, memcpy, io_uring completions) competes with the forward and a run can
// be slower than reading synchronously (issue 41: 0.90-0.93x on a 2-core Sapphire Rapids VM, 1.26x on Zen 4). No
// rule predicts it, so the tuner measures: it runs whole forwards at each candidate depth, alternating so a drift
// of the disk's or the CPU's speed favours none, and keeps the depth whose median forward is shortest. It checks
// the choice again every `recheck_every` forwards and as soon as the forwards drift (another process reads the
// disk, the page cache warms), so a choice made under other conditions does not stay.
//
// A pure function of the timings it is given (no clock, no threads): the Prefetcher feeds it one duration per
// forward, from the first module's start to the last module's end, so idle time between forwards is not counted.
// Forwards much longer than the others (a prefill in a server's batch, a pause) are not counted.
//
//   PrefetchTuner t;                 // depths {2, 0}: 2 until measured otherwise
//   for each forward: run it at t.depth(); t.observe(seconds);
//   if (t.decided()) log(t.reason());
#pragma once

#include <string>
#include <vector>

namespace ferry {

struct PrefetchTunerOptions {
  /// Candidate depths (modules read ahead; 0 = synchronous reads). The first is used until measured otherwise and
  /// kept on a tie.
  std::vector<int> depths{2, 0};
  /// Forwards measured per candidate in a probe: two when they separate clearly (every forward of one candidate
  /// shorter than every forward of the others), `samples` when one is shorter in 80% of the pairs or they are
  /// within the margin of each other (and each forward within the margin of its median), up to `max_samples` while
  /// the noise hides which is faster.
  int samples = 3;
  int max_samples = 7;
  /// Another depth replaces the kept one only when its median forward is shorter by more than this fraction
  /// (noise on a shared VM; the kept one costs at most this much).
  double margin = 0.03;
  /// Forwards at the chosen depth before probing again.
  int recheck_every = 64;
  /// Probe again as soon as the median of the last `samples` forwards moves this far from the chosen depth's.
  double drift = 0.25;
  /// A forward longer than this many times the median of those counted is not counted (a prefill, a pause);
  /// `samples` of them in a row are a new normal and start a probe.
  double outlier = 3.0;
};

class PrefetchTuner {
 public:
  /// Throws ferry::Error when options.depths is empty or has a negative depth, samples < 2 or max_samples < samples.
  explicit PrefetchTuner(PrefetchTunerOptions options = {});

  /// The depth to run the next forward at.
  int depth() const noexcept { return depth_; }
  /// The forward just run at depth() took `seconds`.
  void observe(double seconds);

  /// Whether the last observe() ended a probe (a choice was made, even if it kept the depth).
  bool decided() const noexcept { return decided_; }
  /// Whether forwards are being measured at each candidate now.
  bool probing() const noexcept { return probing_; }
  /// The latest choice and why ("depth 2: 0.84 s per forward against 1.02 s at depth 0 (median of 3 each)");
  /// empty before the first probe ends.
  const std::string& reason() const noexcept { return reason_; }
  /// Probes ended so far.
  int probes() const noexcept { return probes_; }

 private:
  void start_probe();
  void end_probe();
  bool is_outlier(double seconds, double reference);
  bool probe_settled(std::size_t rounds) const;

  PrefetchTunerOptions o_;
  int depth_;
  int chosen_;                // the depth kept between probes
  double chosen_median_ = 0;  // its median in the last probe
  bool probing_ = true;
  bool decided_ = false;
  int probes_ = 0;
  std::size_t next_ = 0;                    // index into the probe's schedule
  std::vector<std::vector<double>> probe_;  // per candidate (o_.depths' order), the forwards counted
  std::vector<double> recent_;              // the last forwards at the chosen depth (at most o_.samples)
  int since_choice_ = 0;                    // forwards counted since the last probe ended
  int outliers_in_a_row_ = 0;
  std::string reason_;
};

}  // namespace ferry
