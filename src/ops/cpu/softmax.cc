// The scalar softmax row kernel (numerically stable: subtract the row's maximum before exp). A row of −inf
// (fully masked) or with a NaN gives NaN, as in PyTorch. The op itself is in norm.cc, the AVX2 kernel in
// norm_avx2.cc.
#include <cmath>
#include <limits>

#include "norm_kernels.h"

namespace ferry::ops::cpu::scalar {

void softmax(const float* x, float* y, int64_t D) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < D; ++i) m = x[i] > m ? x[i] : m;
  double s = 0;
  for (int64_t i = 0; i < D; ++i) s += (y[i] = std::exp(x[i] - m));
  const float sum = static_cast<float>(s);
  for (int64_t i = 0; i < D; ++i) y[i] /= sum;
}

}  // namespace ferry::ops::cpu::scalar
