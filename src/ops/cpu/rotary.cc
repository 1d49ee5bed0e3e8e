// Rotary position embeddings on cpu (see rotary.h): the inverse frequencies, argument checks, per-token cos/sin
// tables and the scalar rotation kernels. Angles, cos and sin are f32 like transformers' rotary embedding
// (`freqs = inv_freq.float() @ position_ids.float()`, `emb.cos() * attention_scaling`), and the rotation is
// `q * cos + rotate_half(q) * sin` (GPT-J: rotate_every_two with repeat-interleaved tables).
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "check.h"
#include "ops/cuda_ops.h"
#include "ferry/core/thread_pool.h"
#include "ferry/ops/rotary.h"
#include "rotary_kernels.h"

namespace ferry::ops {
namespace cpu {
namespace scalar {

void rotate_half(float* x, const float* cos, const float* sin, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = x[i], x2 = x[i + half];
    x[i] = x1 * cos[i] - x2 * sin[i];
    x[i + half] = x2 * cos[i] + x1 * sin[i];
  }
}

void interleaved(float* x, const float* cos2, const float* sin2, int64_t rotary_dim) {
  for (int64_t j = 0; j < rotary_dim; j += 2) {
    const float a = x[j], b = x[j + 1];
    x[j] = a * cos2[j] + b * sin2[j];
    x[j + 1] = b * cos2[j + 1] + a * sin2[j + 1];
  }
}

}  // namespace scalar

const RotaryKernels& rotary_kernels(Isa isa) {
  static const RotaryKernels s{scalar::rotate_half, scalar::interleaved};
#if FERRY_X86_KERNELS
  static const RotaryKernels v{avx2::rotate_half, avx2::interleaved};
  if (isa >= Isa::AVX2) return v;
#endif
  (void)isa;
  return s;
}

}  // namespace cpu

Tensor rope_inv_freq(int64_t rotary_dim, double theta) {
  if (rotary_dim <= 0 || rotary_dim % 2 != 0)
    cpu::fail("rope_inv_freq", fmt::format("rotary_dim {} must be even and positive", rotary_dim),
              "check head_dim and partial_rotary_factor in config.json");
  if (!(theta > 0) || !std::isfinite(theta))
    cpu::fail("rope_inv_freq", fmt::format("theta {} must be a positive number", theta),
              "check rope_theta in config.json");
  std::vector<float> inv(static_cast<std::size_t>(rotary_dim / 2));
  const float base = static_cast<float>(theta), dim = static_cast<float>(rotary_dim);
  for (std::size_t i = 0; i < inv.size(); ++i)
    inv[i] = 1.0f / std::pow(base, static_cast<float>(2 * i) / dim);
  return Tensor::from_vector(inv, {static_cast<int64_t>(inv.size())});
}

void apply_rotary_(Tensor& x, const Tensor& positions, const Tensor& inv_freq, RopeLayout layout,
                   float attention_scaling) {
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(x)) return cuda::apply_rotary_(x, positions, inv_freq, layout, attention_scaling);
  }
  const char* op = "apply_rotary_";
  cpu::check_f32(op, "x", x);
  cpu::check_writable(op, "x", x);
  if (x.dim() != 3) cpu::fail(op, cpu::describe("x", x) + " must be [tokens, heads, head_dim]");
  cpu::check_host(op, "positions", positions);
  if (positions.dtype() != DType::I64 || positions.dim() != 1 || positions.size(0) != x.size(0))
    cpu::fail(op, fmt::format("{} must be i64 [{}] (one position per token of {})",
                              cpu::describe("positions", positions), x.size(0), cpu::describe("x", x)));
  cpu::check_f32(op, "inv_freq", inv_freq);
  const int64_t T = x.size(0), H = x.size(1), D = x.size(2);
  const int64_t half = inv_freq.numel(), R = 2 * half;
  if (inv_freq.dim() != 1 || R > D)
    cpu::fail(op, fmt::format("{} needs shape [R/2] with rotary_dim R ≤ head_dim {}", cpu::describe("inv_freq", inv_freq), D),
              "build it with rope_inv_freq(rotary_dim, theta)");
  if (T == 0 || H == 0 || R == 0) return;
  const auto kern = cpu::rotary_kernels(cpu_isa());
  const int64_t* pos = positions.data<int64_t>();
  const float* freq = inv_freq.data<float>();
  float* xp = x.data<float>();
  parallel_for(0, T, std::max<int64_t>(1, 256 / std::max<int64_t>(H, 1)), [&](int64_t t0, int64_t t1) {
    std::vector<float> c(static_cast<std::size_t>(R)), s(static_cast<std::size_t>(R));
    for (int64_t t = t0; t < t1; ++t) {
      const float p = static_cast<float>(pos[t]);
      for (int64_t i = 0; i < half; ++i) {
        const float angle = p * freq[i];
        const float ci = std::cos(angle) * attention_scaling, si = std::sin(angle) * attention_scaling;
        if (layout == RopeLayout::RotateHalf) {
          c[i] = ci, s[i] = si;
        } else {
          c[2 * i] = c[2 * i + 1] = ci;
          s[2 * i] = -si, s[2 * i + 1] = si;
        }
      }
      for (int64_t h = 0; h < H; ++h) {
        float* head = xp + (t * H + h) * D;
        if (layout == RopeLayout::RotateHalf) kern.rotate_half(head, c.data(), s.data(), half);
        else kern.interleaved(head, c.data(), s.data(), R);
      }
    }
  });
}

}  // namespace ferry::ops
