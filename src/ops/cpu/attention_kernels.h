// The kernel behind ops::attention (attention.h), one per ISA: scalar in attention.cc, AVX2 in attention_avx2.cc.
// It attends the query rows of `heads` heads that share one kv head (a GQA group, or part of one) over n
// consecutive cache rows, already clipped to the causal (optionally sliding) window, and writes their outputs.
// Taking the group at once lets the AVX2 kernel read each cache row once for all of its heads.
#pragma once

#include <cstdint>

#include "ferry/core/cpu_features.h"
#include "ferry/core/dtype.h"

namespace ferry::ops::cpu {

/// q: heads × D floats (head h at q + h·D). k, v: the first of n cache rows of dtype kv (f32, f16 or bf16),
/// consecutive rows k_stride (Hkv·D) and v_stride (Hkv·Dv) elements apart. scores: scratch of heads × n floats.
/// out: heads × Dv floats, out_h = Σ_j softmax_j(cap(scale · q_h·k_j + bias_h[j])) · v_j, where cap(s) = softcap ·
/// tanh(s / softcap) for softcap > 0 and s otherwise. bias: nullptr (none), or n floats per head, head h's at
/// bias + h · bias_stride (T5's relative position bias, ALiBi).
using AttendFn = void (*)(const float* q, int64_t heads, const void* k, int64_t k_stride, const void* v,
                          int64_t v_stride, DType kv, int64_t D, int64_t Dv, int64_t n, float scale, float softcap,
                          const float* bias, int64_t bias_stride, float* scores, float* out);

/// scores[j] = softcap · tanh(scores[j] / softcap) for j < n; nothing when softcap ≤ 0. Shared by both kernels.
void softcap_scores(float* scores, int64_t n, float softcap);

AttendFn attend_kernel(Isa isa);

namespace scalar {
void attend(const float* q, int64_t heads, const void* k, int64_t k_stride, const void* v, int64_t v_stride, DType kv,
            int64_t D, int64_t Dv, int64_t n, float scale, float softcap, const float* bias, int64_t bias_stride,
            float* scores, float* out);
}
namespace avx2 {
void attend(const float* q, int64_t heads, const void* k, int64_t k_stride, const void* v, int64_t v_stride, DType kv,
            int64_t D, int64_t Dv, int64_t n, float scale, float softcap, const float* bias, int64_t bias_stride,
            float* scores, float* out);
}

}  // namespace ferry::ops::cpu
