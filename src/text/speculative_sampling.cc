// speculative_sample: the acceptance rule of speculative sampling (include/ferry/text/sampling.h; its use in
// include/ferry/text/speculative.h).
#include <algorithm>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/text/sampling.h"

namespace ferry::text {

SpeculativeDraw speculative_sample(std::span<const double> p, std::span<const double> q, TokenId proposal, Rng& rng) {
  if (p.size() != q.size())
    throw Error("the model's distribution has " + std::to_string(p.size()) + " tokens and the draft's " +
                    std::to_string(q.size()),
                "speculative sampling");
  if (proposal < 0 || static_cast<std::size_t>(proposal) >= p.size())
    throw Error("proposal " + std::to_string(proposal) + " lies outside the vocabulary of " + std::to_string(p.size()) +
                    " tokens",
                "speculative sampling");
  const auto x = static_cast<std::size_t>(proposal);
  // Kept with probability min(1, p(x) / q(x)): u * q(x) < p(x) with u uniform in [0, 1). A proposal the draft gives
  // no mass (it did not draw it) is never kept.
  if (q[x] > 0.0 && rng.uniform() * q[x] < p[x]) return {proposal, true};
  // Rejected: what p has beyond q. Empty only when p <= q everywhere, i.e. p == q, and then the proposal was kept
  // unless q(x) was 0 — a proposal not drawn from q; p itself is the right law then.
  std::vector<double> residual(p.size());
  double mass = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) mass += residual[i] = std::max(0.0, p[i] - q[i]);
  return {mass > 0.0 ? sample_weights(residual, rng) : sample_weights(p, rng), false};
}

}  // namespace ferry::text
