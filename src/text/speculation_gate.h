// Whether proposing pays, from the generation's own timings (speculative.cc): a step that proposed costs a forward
// over several tokens and gives the tokens kept + 1; a step that did not, one forward and one token. Where the kept
// tokens do not pay for the longer forwards (a small model in RAM is not bound by its reads; proposals that are rarely
// kept), proposing pauses. Only which steps propose changes, never the output.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace ferry::text::detail {

class SpeculationGate {
 public:
  /// Proposing steps slower (tokens per second) than kSlack × plain steps pause proposing.
  static constexpr double kSlack = 0.97;
  /// Steps of each kind before a comparison; the first pause, and the longest (pauses double while proposing keeps
  /// losing, and return to the first once it pays).
  static constexpr int kMinSteps = 4, kMinPlain = 2;
  static constexpr int64_t kFirstPause = 16, kLongestPause = 256;

  bool propose_now() const noexcept { return paused_ == 0; }

  /// A step's wall time (forward and proposing), whether it proposed, and the tokens it gave.
  void record(bool proposed, double seconds, std::size_t tokens) {
    if (!proposed) {
      add(plain_, seconds, tokens);
      if (paused_ > 0) --paused_;
      return;
    }
    add(spec_, seconds, tokens);
    if (spec_.n < kMinSteps) return;
    if (plain_.n < kMinPlain) {  // no plain steps to compare with yet: measure some
      paused_ = kMinPlain - plain_.n;
      return;
    }
    if (spec_.rate() < kSlack * plain_.rate()) {
      paused_ = pause_;
      pause_ = std::min(kLongestPause, pause_ * 2);
      spec_ = {};  // measured again after the pause
    } else {
      pause_ = kFirstPause;
    }
  }

  int64_t paused_steps() const noexcept { return paused_; }

 private:
  // Exponential averages (weight 1/4 for the newest step) of seconds and tokens per step.
  struct Ema {
    double seconds = 0, tokens = 0;
    int n = 0;
    double rate() const { return seconds > 0 ? tokens / seconds : 0; }
  };
  static void add(Ema& e, double seconds, std::size_t tokens) {
    const double a = e.n == 0 ? 1.0 : 0.25;
    e.seconds += a * (seconds - e.seconds);
    e.tokens += a * (static_cast<double>(tokens) - e.tokens);
    ++e.n;
  }

  Ema spec_, plain_;
  int64_t paused_ = 0, pause_ = kFirstPause;
};

}  // namespace ferry::text::detail
