// The argmax row kernel behind ops::argmax (gather.h), one per ISA: scalar in select.cc, AVX2 in select_avx2.cc.
// Both return the index of the first maximum of x[0..V), NaN ranking above every number (first NaN wins).
#pragma once

#include <cstdint>

namespace ferry::ops::cpu {
namespace scalar {
int64_t argmax_row(const float* x, int64_t V);
}
namespace avx2 {
int64_t argmax_row(const float* x, int64_t V);
}
}  // namespace ferry::ops::cpu
