// Prefetcher: reads a dispatched model's offloaded weights ahead of the forward that needs them (beyond Accelerate,
// whose hooks load each module's weights synchronously when it starts).
//
// The offloaded modules of a model run in the same order on every forward. Each offloading AlignDevicesHook registers
// its module here when attached (so the first guess of the order is the attach order, i.e. the device map's) and
// says when the module is about to run; the first forward confirms the order (a module seen twice ends it), and the
// calls seen then replace the guess. When module i is about to run, the weights of modules i+1 .. i+depth are handed
// to their weights maps' prefetch() on the prefetcher's own thread, so that reading them from disk overlaps module i's
// compute instead of stalling the next module in page faults. After the last module the first ones are prefetched:
// the next forward (the next decode step) starts there.
//
// Nothing depends on it for correctness: a weight whose bytes have not arrived is read by get() exactly as without a
// prefetcher, so outputs are bit-identical with and without. DispatchOptions::prefetch = 0 keeps Accelerate's
// synchronous behaviour, for comparison.
//
// What "prefetch" does is the weights map's business: the disk maps of today read the bytes into the page cache and
// map them, on this thread, so the forward's threads find them resident (the host is the execution device). A map
// that stages weights for a GPU would read into pinned buffers and start the copy on a copy stream here, with the
// same calls. One thread is enough: the reads it issues keep the disk busy.
//
// Not every module runs on every forward: a mixture-of-experts layer runs the experts its router picks for the token.
// The model announces those when it knows them (nn::announce_will_run -> the hook -> announce()): their weights are
// read at once, ahead of the look-ahead's, and from then on the module counts as data-dependent — it is left out of
// the order (neither read ahead by position nor learnt from), so the fixed modules around it keep their order.
//
// How far ahead to read is the machine's business: reading ahead hides the reads behind the compute when the disk is
// the bottleneck, and can slow a forward whose cores it competes for (issue 41). Prefetcher(kPrefetchAuto) measures:
// the forward's hooks also say when a module has run (has_run), so it knows each forward's duration (first module's
// start to last module's end) and a PrefetchTuner (prefetch_tuner.h) switches the depth between 2 and 0, forward by
// forward, to keep the faster; the choice and its reason are logged at info level when made (status()).
//
// Warm weights cost (almost) nothing: a module whose last two prefetches found every byte already in memory is only
// looked at one time in eight after that, and checked again as soon as a prefetch has to read. A model whose weights
// stay in the page cache thus runs as without a prefetcher, and one whose weights are evicted (bigger than RAM) is
// prefetched on every forward; after an eviction a module is read synchronously for at most a few forwards.
//
//   auto prefetcher = std::make_shared<Prefetcher>(2);      // two modules ahead
//   AlignDevicesOptions o;  o.prefetcher = prefetcher;  ...  // one prefetcher shared by every hook of the model
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ferry/big_modeling/prefetch_tuner.h"
#include "ferry/io/offload.h"

namespace ferry {

/// A prefetch setting (DispatchOptions::prefetch, `--prefetch auto`): the depth measured per run (see above).
inline constexpr int kPrefetchAuto = -1;
/// The deepest kPrefetchAuto reads ahead (what the staging pool and the GPU's copies ahead are sized for).
inline constexpr int kPrefetchAutoMaxDepth = 2;
/// The most modules a prefetch setting reads ahead: `prefetch`, or kPrefetchAutoMaxDepth for kPrefetchAuto.
constexpr int prefetch_reach(int prefetch) {
  return prefetch == kPrefetchAuto ? kPrefetchAutoMaxDepth : std::max(prefetch, 0);
}
/// "auto" or a depth.
std::string prefetch_name(int prefetch);
/// Reads "auto" or a depth (>= 0); throws ferry::Error naming `where` otherwise.
int parse_prefetch(const std::string& text, const std::string& where);

/// What a Prefetcher does now.
struct PrefetchStatus {
  int depth = 0;             ///< modules read ahead now
  bool self_tuning = false;  ///< kPrefetchAuto: depth is measured
  std::string reason;        ///< the tuner's latest choice and why; empty before its first
  int probes = 0;            ///< the tuner's measurements so far
};

class Prefetcher {
 public:
  /// `depth`: how many modules ahead to read (>= 1), or kPrefetchAuto. The prefetch thread starts with the first
  /// add(): a prefetcher no module registers with costs nothing.
  explicit Prefetcher(int depth = 2, PrefetchTunerOptions tuner = {});
  /// For an option such as DispatchOptions::prefetch: nullptr for 0 (synchronous loading), a prefetcher of that
  /// depth above, a self-tuning one for kPrefetchAuto. Throws ferry::Error naming `where` for another negative.
  static std::shared_ptr<Prefetcher> create(int depth, const std::string& where);
  /// Stops the thread; queued advice is dropped (nothing waits for it).
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  /// Modules read ahead now (kPrefetchAuto: the tuner's choice, which may change each forward).
  int depth() const;
  PrefetchStatus status() const;

  /// Registers a module, identified by `id` (its hook), whose forward reads `names` from `weights`. Registering
  /// an id again replaces its entry.
  void add(const void* id, std::shared_ptr<const io::WeightsMap> weights, std::vector<std::string> names);
  /// Forgets a module (its hook was detached or destroyed). Unknown ids are ignored.
  void remove(const void* id) noexcept;

  /// Module `id` is about to run: queue the weights of the next `depth` modules that are not already queued.
  /// Unknown ids are ignored.
  void will_run(const void* id);
  /// Module `id` will run soon, out of any fixed order (a routed expert): queue its weights now, before the
  /// look-ahead's, and treat it as data-dependent from now on (see above). Unknown ids are ignored.
  /// guess: the model only guesses it may run (the next layer's likely experts): queued last, after the look-ahead;
  /// the next announcement that is not a guess drops the guesses whose reads have not started (stale by then).
  void announce(const void* id, bool guess = false);
  /// Module `id` has run (its forward returned): the end of a forward so far, for the tuner. Unknown ids are ignored.
  void has_run(const void* id);

  /// Blocks until every queued module has been handed to its weights map (tests, benchmarks).
  void wait_idle();

  /// The module ids in the order used to look ahead.
  std::vector<const void*> order() const;
  /// Whether the first forward has confirmed the order.
  bool order_confirmed() const;
  /// How many weight names have been handed to weights maps so far.
  uint64_t prefetched() const;

 private:
  struct Module {
    const void* id;
    std::shared_ptr<const io::WeightsMap> weights;
    std::vector<std::string> names;
    bool queued = false;     // handed to the thread since this module last ran
    bool announced = false;  // data-dependent: read when announced, never by position in the order
    int resident_runs = 0;   // consecutive prefetches that found every byte in memory
    int skipped = 0;         // lookups passed over since the last prefetch (while resident)
  };
  struct Job {
    const void* id;
    std::shared_ptr<const io::WeightsMap> weights;
    std::vector<std::string> names;
    bool announced = false;  // goes before the look-ahead's jobs
    bool guess = false;      // announced as a guess: last, dropped by the next certain announcement
  };
  static constexpr int kResidentAfter = 2;  // prefetches reading nothing before a module counts as resident
  static constexpr int kRecheckEvery = 8;   // a resident module is still prefetched at one lookup in this many

  void run();
  std::size_t index_of(const void* id) const;  // modules_.size() when absent; caller holds mu_
  void reindex();                              // after modules_ changed; caller holds mu_
  void confirm_order();                        // caller holds mu_
  std::string forward_started();               // a forward starts: feeds the tuner; caller holds mu_

  int depth_;
  const std::unique_ptr<PrefetchTuner> tuner_;  // kPrefetchAuto
  using Clock = std::chrono::steady_clock;
  Clock::time_point forward_start_{}, last_end_{};  // the running forward's first start, its last module's end
  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::vector<Module> modules_;
  std::unordered_map<const void*, std::size_t> position_;  // id -> index in modules_
  std::vector<const void*> seen_;  // first forward's calls, in order, until one repeats
  bool confirmed_ = false;
  // After the order is confirmed: where a module's successor was not the next one in the order the last time it ran
  // (an encoder-decoder model runs its encoder once, then its decoder per token: after the decoder's last module
  // comes the decoder's first, not the encoder's), module id -> the id that ran after it.
  std::unordered_map<const void*, const void*> jump_;
  const void* last_run_ = nullptr;
  std::deque<Job> queue_;
  bool busy_ = false;
  bool stop_ = false;
  uint64_t prefetched_ = 0;
  std::thread thread_;
};

}  // namespace ferry
