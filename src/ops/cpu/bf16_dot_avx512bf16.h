// The one dot product of the bf16 GEMV and small-batch kernels (gemv_avx512bf16.cc, small_batch_avx512bf16.cc):
// a bf16 weight row against a bf16 activation row, both read as 32 bf16 (one zmm) per step. Both kernels compute every
// output with exactly this sequence of instructions — one f32 accumulator vector, vdpbf16ps over the whole 32-element
// steps in order, one masked step for the K tail, _mm512_reduce_add_ps, then + bias — so an output is bit for bit the
// same whichever kernel computes it, and whatever else shares its tile: a sequence's result does not depend on how
// many rows share its batch (see linear_kernels.h).
// Only for translation units built with -mavx512bf16; everything has internal linkage, so no code of a higher ISA can
// be picked by the linker for a lower one.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace ferry::ops::cpu::avx512bf16 {
namespace {

inline __m512bh load_bf16x32(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }

// The mask of the K tail's `left` (< 32) elements.
inline __mmask32 tail_mask(int64_t left) { return static_cast<__mmask32>((1u << left) - 1u); }

// acc += pairwise products of 32 weights and 32 activations (elements past a tail mask are zero in both).
inline __m512 dot_step(__m512 acc, __m512bh w, __m512bh x) { return _mm512_dpbf16_ps(acc, w, x); }
inline __m512bh load_tail(const uint16_t* p, __mmask32 mask) { return (__m512bh)_mm512_maskz_loadu_epi16(mask, p); }

// The output of an accumulator: its 16 lanes summed, plus the bias (when there is one).
inline float dot_result(__m512 acc, const float* bias, int64_t n) {
  const float s = _mm512_reduce_add_ps(acc);
  return bias ? s + bias[n] : s;
}

}  // namespace
}  // namespace ferry::ops::cpu::avx512bf16
