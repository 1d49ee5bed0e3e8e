// PrefetchTuner (see include/ferry/big_modeling/prefetch_tuner.h).
#include "ferry/big_modeling/prefetch_tuner.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ferry/core/error.h"

namespace ferry {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The fraction of pairs (x from a, y from b) with x < y (ties count half): how surely a's forwards are the shorter
// (the Mann-Whitney statistic, scaled to 0..1).
double shorter_fraction(const std::vector<double>& a, const std::vector<double>& b) {
  double wins = 0;
  for (double x : a)
    for (double y : b) wins += x < y ? 1 : x == y ? 0.5 : 0;
  return wins / static_cast<double>(a.size() * b.size());
}

// How far a candidate's forwards stray from their median, relative to it.
double spread(const std::vector<double>& v) {
  const double m = median(v);
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return m > 0 ? std::max(m - *lo, *hi - m) / m : 0;
}

}  // namespace

PrefetchTuner::PrefetchTuner(PrefetchTunerOptions options) : o_(std::move(options)) {
  if (o_.depths.empty()) throw Error("the prefetch tuner needs at least one candidate depth", "PrefetchTuner");
  for (int d : o_.depths)
    if (d < 0) throw Error("a prefetch depth cannot be negative, got " + std::to_string(d), "PrefetchTuner");
  if (o_.samples < 2)
    throw Error("the prefetch tuner needs at least 2 forwards per depth, got " + std::to_string(o_.samples),
                "PrefetchTuner");
  if (o_.max_samples < o_.samples)
    throw Error(fmt::format("max_samples ({}) is below samples ({})", o_.max_samples, o_.samples), "PrefetchTuner");
  chosen_ = depth_ = o_.depths.front();
  start_probe();
}

// The chosen depth first, then the others in the options' order; one forward each, round after round.
void PrefetchTuner::start_probe() {
  probing_ = true;
  next_ = 0;
  outliers_in_a_row_ = 0;
  probe_.assign(o_.depths.size(), {});
  std::stable_partition(o_.depths.begin(), o_.depths.end(), [&](int d) { return d == chosen_; });
  depth_ = o_.depths.front();
  if (o_.depths.size() == 1) {  // nothing to compare
    probing_ = false;
    since_choice_ = 0;
  }
}

bool PrefetchTuner::is_outlier(double seconds, double reference) {
  if (reference <= 0 || seconds <= o_.outlier * reference) {
    outliers_in_a_row_ = 0;
    return false;
  }
  ++outliers_in_a_row_;
  return true;
}

void PrefetchTuner::observe(double seconds) {
  decided_ = false;
  if (!(seconds >= 0) || !std::isfinite(seconds)) return;
  if (!probing_) {
    if (is_outlier(seconds, chosen_median_)) {
      if (outliers_in_a_row_ >= o_.samples) {  // a new normal: measured afresh, not against the old
        chosen_median_ = 0;
        start_probe();
      }
      return;
    }
    recent_.push_back(seconds);
    if (recent_.size() > static_cast<std::size_t>(o_.samples)) recent_.erase(recent_.begin());
    ++since_choice_;
    const bool drifted = recent_.size() == static_cast<std::size_t>(o_.samples) && chosen_median_ > 0 &&
                         std::abs(median(recent_) / chosen_median_ - 1) > o_.drift;
    if (drifted || since_choice_ >= o_.recheck_every) start_probe();
    return;
  }
  std::vector<double> counted;
  for (const auto& s : probe_) counted.insert(counted.end(), s.begin(), s.end());
  const double reference = counted.empty() ? (probes_ > 0 ? chosen_median_ : 0) : median(counted);
  if (is_outlier(seconds, reference)) {
    if (outliers_in_a_row_ >= o_.samples) {  // the earlier forwards were the odd ones: start over
      chosen_median_ = 0;
      start_probe();
    }
    return;  // the same depth runs again
  }
  const std::size_t n = o_.depths.size();
  probe_[next_ % n].push_back(seconds);
  ++next_;
  if (next_ % n == 0 && probe_settled(next_ / n)) {  // a round ended: every candidate has as many forwards
    end_probe();
    return;
  }
  depth_ = o_.depths[next_ % n];
}

// After `rounds` forwards per candidate: whether the fastest is known. Every forward of it shorter than every forward
// of the others after 2; after `samples`, shorter in 80% of the pairs, or within the margin with little noise (a
// tie: either costs at most the margin); after `max_samples`, whatever the medians say.
bool PrefetchTuner::probe_settled(std::size_t rounds) const {
  if (rounds < 2) return false;
  if (rounds >= static_cast<std::size_t>(o_.max_samples)) return true;
  const std::size_t n = o_.depths.size();
  std::size_t best = 0;
  for (std::size_t i = 1; i < n; ++i)
    if (median(probe_[i]) < median(probe_[best])) best = i;
  const bool enough = rounds >= static_cast<std::size_t>(o_.samples);
  for (std::size_t i = 0; i < n; ++i) {
    if (i == best) continue;
    const double sure = shorter_fraction(probe_[best], probe_[i]);
    if (sure == 1) continue;
    if (!enough) return false;
    if (sure >= 0.8) continue;
    // Within the margin, and each candidate's forwards within the margin of its median: close, and known to be.
    const bool close = median(probe_[best]) >= median(probe_[i]) * (1 - o_.margin);
    if (!close || spread(probe_[best]) > o_.margin || spread(probe_[i]) > o_.margin) return false;
  }
  return true;
}

void PrefetchTuner::end_probe() {
  const std::size_t n = o_.depths.size();
  std::vector<double> medians(n);
  for (std::size_t i = 0; i < n; ++i) medians[i] = median(probe_[i]);
  // o_.depths[0] is the depth kept so far; another replaces it only when faster by more than the margin.
  std::size_t best = 0;
  for (std::size_t i = 1; i < n; ++i)
    if (medians[i] < medians[best]) best = i;
  const bool replaced = best != 0 && medians[best] < medians[0] * (1 - o_.margin);
  const std::size_t pick = replaced ? best : 0;
  chosen_ = depth_ = o_.depths[pick];
  chosen_median_ = medians[pick];
  reason_ = fmt::format("depth {}: {:.3f} s per forward", chosen_, medians[pick]);
  for (std::size_t i = 0; i < n; ++i)
    if (i != pick) reason_ += fmt::format(", against {:.3f} s at depth {}", medians[i], o_.depths[i]);
  reason_ += fmt::format(" (median of {} forwards each", probe_[0].size());
  if (!replaced && best != 0) reason_ += fmt::format("; within {:.0f}%: kept", o_.margin * 100);
  reason_ += ")";
  probing_ = false;
  decided_ = true;
  ++probes_;
  recent_.clear();
  since_choice_ = 0;
  outliers_in_a_row_ = 0;
}

}  // namespace ferry
