// The per-(token, head) kernel behind ops::attention (attention.h), one per ISA: scalar in attention.cc, AVX2 in
// attention_avx2.cc. It attends one query row over n consecutive cache rows (already clipped to the causal,
// optionally sliding, window) and writes one output row.
#pragma once

#include <cstdint>

#include "ferry/core/cpu_features.h"
#include "ferry/core/dtype.h"

namespace ferry::ops::cpu {

/// q: D floats. k, v: the first of n cache rows of dtype kv (f32, f16 or bf16), consecutive rows k_stride
/// (Hkv·D) and v_stride (Hkv·Dv) elements apart. scores: scratch of n floats.
/// out: Dv floats = Σ_j softmax_j(scale · q·k_j) · v_j.
using AttendFn = void (*)(const float* q, const void* k, int64_t k_stride, const void* v, int64_t v_stride, DType kv,
                          int64_t D, int64_t Dv, int64_t n, float scale, float* scores, float* out);

AttendFn attend_kernel(Isa isa);

namespace scalar {
void attend(const float* q, const void* k, int64_t k_stride, const void* v, int64_t v_stride, DType kv, int64_t D,
            int64_t Dv, int64_t n, float scale, float* scores, float* out);
}
namespace avx2 {
void attend(const float* q, const void* k, int64_t k_stride, const void* v, int64_t v_stride, DType kv, int64_t D,
            int64_t Dv, int64_t n, float scale, float* scores, float* out);
}

}  // namespace ferry::ops::cpu
