// Every CUDA kernel against the cpu kernel on the same inputs: each op, each weight / cache dtype, odd shapes
// (features not a multiple of the vector width, one row, many rows, grouped heads, sliding windows). Tolerances
// are stated per op: f32 arithmetic in a different order (and expf/erff/tanhf instead of the cpu's polynomial
// approximations) differs by a few ulps; the cuBLAS prefill path rounds x to a bf16/f16 high + low pair.
// Skips without a GPU ("no CUDA device").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ferry/core/cpu_features.h"
#include "ferry/ops/attention.h"
#include "ferry/ops/elementwise.h"
#include "ferry/ops/gather.h"
#include "ferry/ops/linear.h"
#include "ferry/ops/norm.h"
#include "ferry/ops/rotary.h"
#include "support/cuda_device.h"
#include "support/error_of.h"

namespace ferry {
namespace {

const Device kGpu = Device::cuda(0);

Tensor random(Shape shape, uint32_t seed, float scale = 1.0f, DType dtype = DType::F32) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (auto& x : v) x = dist(rng);
  return Tensor::from_vector(v, std::move(shape)).to(dtype);
}

// |gpu - cpu| <= atol + rtol * |cpu| elementwise, reporting the worst element.
void expect_close(const Tensor& cpu, const Tensor& gpu, double atol, double rtol, const std::string& what) {
  ASSERT_EQ(gpu.device(), kGpu) << what;
  ASSERT_EQ(cpu.shape(), gpu.shape()) << what;
  const auto a = cpu.to_vector<float>();
  const auto b = gpu.to_vector<float>();
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    const double excess = std::abs(double(a[i]) - b[i]) - (atol + rtol * std::abs(double(a[i])));
    if (excess > worst || std::isnan(excess)) worst = std::isnan(excess) ? INFINITY : excess, at = i;
  }
  EXPECT_EQ(worst, 0) << what << ": element " << at << " cpu " << a[at] << " gpu " << b[at];
}

TEST(CudaOps, Elementwise) {
  FERRY_REQUIRE_CUDA();
  for (Shape shape : {Shape{1, 7}, Shape{3, 1000}, Shape{2, 3, 33}}) {
    Tensor a = random(shape, 1, 3.0f), b = random(Shape(shape.end() - 1, shape.end()), 2);
    Tensor ga = a.to(kGpu), gb = b.to(kGpu);
    expect_close(ops::add(a, b), ops::add(ga, gb), 0, 0, "add");
    expect_close(ops::mul(a, b), ops::mul(ga, gb), 0, 0, "mul");
    expect_close(ops::scale(a, 0.37f), ops::scale(ga, 0.37f), 0, 0, "scale");
    expect_close(ops::silu(a), ops::silu(ga), 1e-6, 1e-5, "silu");
    expect_close(ops::gelu(a), ops::gelu(ga), 1e-6, 1e-5, "gelu");
    expect_close(ops::gelu_tanh(a), ops::gelu_tanh(ga), 1e-6, 1e-5, "gelu_tanh");
    expect_close(ops::relu(a), ops::relu(ga), 0, 0, "relu");
    expect_close(ops::softcap(a, 1.5f), ops::softcap(ga, 1.5f), 1e-6, 1e-5, "softcap");
    Tensor up = random(shape, 3);
    expect_close(ops::silu_mul(a, up), ops::silu_mul(ga, up.to(kGpu)), 1e-6, 1e-5, "silu_mul");
    Tensor c = a.clone(), gc = ga.clone();
    ops::add_(c, b);
    ops::add_(gc, gb);
    expect_close(c, gc, 0, 0, "add_");
    ops::mul_(c, c);
    ops::mul_(gc, gc);
    expect_close(c, gc, 0, 0, "mul_ with itself");
  }
}

TEST(CudaOps, Norms) {
  FERRY_REQUIRE_CUDA();
  for (int64_t D : {1, 7, 64, 2049}) {
    Tensor x = random({5, D}, 4, 2.0f);
    for (DType wt : {DType::F32, DType::F16, DType::BF16}) {
      Tensor w = random({D}, 5, 1.0f, wt), b = random({D}, 6, 1.0f, wt);
      expect_close(ops::rms_norm(x, w, 1e-6f), ops::rms_norm(x.to(kGpu), w.to(kGpu), 1e-6f), 1e-6, 1e-5,
                   "rms_norm " + std::string(dtype_name(wt)));
      expect_close(ops::layer_norm(x, w, b, 1e-5f), ops::layer_norm(x.to(kGpu), w.to(kGpu), b.to(kGpu), 1e-5f), 1e-5,
                   1e-5, "layer_norm " + std::string(dtype_name(wt)));
    }
    expect_close(ops::rms_norm(x, {}, 1e-6f), ops::rms_norm(x.to(kGpu), {}, 1e-6f), 1e-6, 1e-5, "rms_norm no weight");
    expect_close(ops::softmax(x), ops::softmax(x.to(kGpu)), 1e-7, 1e-5, "softmax");
  }
  Tensor inf = Tensor::full({2, 3}, -INFINITY, DType::F32);
  expect_close(ops::softmax(inf), ops::softmax(inf.to(kGpu)), 0, 0, "softmax of -inf rows is NaN");
}

TEST(CudaOps, RotaryBothLayouts) {
  FERRY_REQUIRE_CUDA();
  for (auto layout : {ops::RopeLayout::RotateHalf, ops::RopeLayout::Interleaved}) {
    for (int64_t R : {64, 32}) {  // full and partial rotary_dim of head_dim 64
      Tensor x = random({6, 3, 64}, 7);
      Tensor pos = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 17, 300, 4095}, {6});
      Tensor inv = ops::rope_inv_freq(R, 10000.0);
      Tensor cpu = x.clone(), gpu = x.to(kGpu);
      ops::apply_rotary_(cpu, pos, inv, layout, 0.9f);
      ops::apply_rotary_(gpu, pos.to(kGpu), inv.to(kGpu), layout, 0.9f);
      expect_close(cpu, gpu, 1e-5, 1e-5, "rope R=" + std::to_string(R));
    }
  }
}

TEST(CudaOps, EmbeddingAndArgmax) {
  FERRY_REQUIRE_CUDA();
  for (DType wt : {DType::F32, DType::F16, DType::BF16, DType::F8_E4M3FN}) {
    Tensor w = random({50, 9}, 8, 1.0f, wt);
    Tensor ids = Tensor::from_vector(std::vector<int64_t>{3, 0, 49, 3}, {2, 2});
    expect_close(ops::embedding(w, ids), ops::embedding(w.to(kGpu), ids.to(kGpu)), 0, 0,
                 "embedding " + std::string(dtype_name(wt)));
  }
  Tensor w = random({50, 9}, 8).to(kGpu);
  const std::string msg =
      test::error_of([&] { ops::embedding(w, Tensor::from_vector(std::vector<int64_t>{1, 50}, {2}).to(kGpu)); });
  EXPECT_NE(msg.find("token id 50"), std::string::npos) << msg;

  Tensor logits = random({3, 32001}, 9);
  std::vector<float> v = logits.to_vector<float>();
  v[32000] = v[5] = 1e9f;        // tie: the lower index wins
  v[32001 + 7] = NAN;            // NaN ranks above every number
  Tensor tied = Tensor::from_vector(v, {3, 32001});
  EXPECT_EQ(ops::argmax(tied.to(kGpu)).to_vector<int64_t>(), ops::argmax(tied).to_vector<int64_t>());
  auto [vals, idx] = ops::topk(tied.select(2).to(kGpu), 5);
  EXPECT_EQ(idx.device(), kGpu);
  EXPECT_EQ(idx.to_vector<int64_t>(), ops::topk(tied.select(2), 5).second.to_vector<int64_t>());
}

TEST(CudaOps, LinearEveryWeightDtypeGemvAndGemm) {
  FERRY_REQUIRE_CUDA();
  // The cpu reference with f32 activations: on AVX-512 BF16 CPUs the cpu rounds x to bf16 for bf16 weights
  // (vdpbf16ps), which the GPU does not; AVX2 keeps x in f32 as the GPU does.
  ScopedIsa f32_activations(std::min(cpu_isa(), Isa::AVX2));
  for (DType wt : {DType::F32, DType::F16, DType::BF16, DType::F8_E4M3FN, DType::F8_E5M2}) {
    for (int64_t K : {64, 100, 2048}) {  // 100: not a multiple of the 16-byte vector
      for (int64_t T : {1, 3, 8, 9, 64}) {
        const int64_t N = 77;
        Tensor x = random({T, K}, 10), w = random({N, K}, 11, 0.05f, wt), b = random({N}, 12, 1.0f, DType::BF16);
        const Tensor cpu = ops::linear(x, w, b), gpu = ops::linear(x.to(kGpu), w.to(kGpu), b.to(kGpu));
        // GEMV (T ≤ 8): f32 accumulation in another order. GEMM: x as a bf16/f16 hi + lo pair (~2^-16 relative).
        const double rtol = T <= 8 || wt == DType::F32 ? 1e-5 : 2e-4;
        expect_close(cpu, gpu, 1e-4, rtol,
                     "linear " + std::string(dtype_name(wt)) + " T=" + std::to_string(T) + " K=" + std::to_string(K));
      }
    }
  }
  Tensor x = random({4, 33}, 13), w = random({9, 33}, 14);
  Tensor out = Tensor::empty({4, 9}, DType::F32, kGpu);
  ops::linear_into(x.to(kGpu), w.to(kGpu), {}, out);
  expect_close(ops::linear(x, w), out, 1e-5, 1e-5, "linear_into");
  Tensor a = random({37, 65}, 15), m = random({65, 19}, 16);
  expect_close(ops::matmul(a, m), ops::matmul(a.to(kGpu), m.to(kGpu)), 1e-4, 1e-5, "matmul");
  const std::string msg = test::error_of([&] { ops::linear(x.to(kGpu), w); });  // weight left on the host
  EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
}

TEST(CudaOps, AttentionGroupedHeadsWindowsAndCacheDtypes) {
  FERRY_REQUIRE_CUDA();
  struct Case {
    int64_t T, S, Hq, Hkv, D, window;
  };
  for (Case c : {Case{1, 1, 4, 4, 64, 0}, Case{1, 300, 32, 4, 64, 0}, Case{7, 7, 8, 2, 128, 0}, Case{5, 40, 6, 3, 80, 0},
                 Case{9, 50, 4, 1, 32, 16}, Case{1, 513, 2, 2, 256, 100}}) {
    for (DType kv : {DType::F32, DType::F16, DType::BF16}) {
      Tensor q = random({c.T, c.Hq, c.D}, 17);
      Tensor k = random({c.S, c.Hkv, c.D}, 18, 1.0f, kv), v = random({c.S, c.Hkv, c.D}, 19, 1.0f, kv);
      const int64_t offset = c.S - c.T;
      const float scale = 1.0f / std::sqrt(float(c.D));
      expect_close(ops::attention(q, k, v, offset, scale, c.window),
                   ops::attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), offset, scale, c.window), 1e-5, 1e-4,
                   "attention T=" + std::to_string(c.T) + " S=" + std::to_string(c.S) + " " +
                       std::string(dtype_name(kv)));
    }
  }
}

// Gemma 2's score soft-capping (cap · tanh(s / cap) before the softmax) on the GPU kernel, against the cpu's.
TEST(CudaOps, AttentionSoftcapMatchesCpu) {
  FERRY_REQUIRE_CUDA();
  for (int64_t window : {int64_t{0}, int64_t{5}}) {
    for (DType kv : {DType::F32, DType::BF16}) {
      Tensor q = random({7, 8, 256}, 20, 2.0f);
      Tensor k = random({40, 4, 256}, 21, 2.0f, kv), v = random({40, 4, 256}, 22, 1.0f, kv);
      expect_close(ops::attention(q, k, v, 33, 0.0625f, window, 3.0f),
                   ops::attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), 33, 0.0625f, window, 3.0f), 1e-5, 1e-4,
                   "softcap attention window " + std::to_string(window) + " " + std::string(dtype_name(kv)));
    }
  }
}

// T5's attention: an [H, T, S] bias added to unscaled scores, causal (decoder self-attention with a cache offset)
// or not (encoder, and cross-attention without a bias), keys in every cache dtype, against the cpu kernel.
TEST(CudaOps, AttentionWithBiasCausalOrNotEveryCacheDtype) {
  FERRY_REQUIRE_CUDA();
  struct Case {
    int64_t T, S, H, D;
    bool causal, with_bias;
  };
  for (Case c : {Case{6, 6, 4, 64, false, true}, Case{1, 9, 8, 64, true, true}, Case{5, 12, 3, 32, true, true},
                 Case{7, 11, 6, 64, false, false}, Case{1, 1, 2, 100, true, true}, Case{3, 300, 2, 256, false, true}}) {
    for (DType kv : {DType::F32, DType::F16, DType::BF16}) {
      Tensor q = random({c.T, c.H, c.D}, 21);
      Tensor k = random({c.S, c.H, c.D}, 22, 1.0f, kv), v = random({c.S, c.H, c.D}, 23, 1.0f, kv);
      Tensor bias = c.with_bias ? random({c.H, c.T, c.S}, 24, 2.0f) : Tensor();
      const int64_t offset = c.causal ? c.S - c.T : 0;
      const std::string what = "attention_with_bias T=" + std::to_string(c.T) + " S=" + std::to_string(c.S) +
                               (c.causal ? " causal" : "") + (c.with_bias ? " bias " : " ") + std::string(dtype_name(kv));
      const Tensor gpu_bias = bias.defined() ? bias.to(kGpu) : Tensor();
      expect_close(ops::attention_with_bias(q, k, v, bias, offset, c.causal),
                   ops::attention_with_bias(q.to(kGpu), k.to(kGpu), v.to(kGpu), gpu_bias, offset, c.causal), 1e-5,
                   1e-4, what);
    }
  }
  Tensor q = random({2, 2, 8}, 25), k = random({2, 2, 8}, 26);
  const std::string msg = test::error_of([&] { ops::attention_with_bias(q.to(kGpu), k.to(kGpu), k, {}, 0, false); });
  EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;  // v left on the host
}

}  // namespace
}  // namespace ferry
