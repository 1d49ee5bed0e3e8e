// Google Highway against ferry's hand-written intrinsics on the decode GEMV (one token, K = 4096), to decide with
// numbers whether the CPU kernels should move onto Highway (write once, dispatch to AVX2 / AVX-512 / NEON / SVE).
//
//   HwyVsFerry/<kernel>/hwy:<target>/ferry:<isa>     N = 4096 rows, both sides on ferry's pool, weights from DRAM
//   HwyVsFerryL2/<kernel>/hwy:<target>/ferry:<isa>   N = 128 rows (≤ 1 MiB), one thread, the same weight every pass
//                                                    (L2-resident: instruction throughput, not the memory system)
//     f16         f16 weights, f32 x          Highway: PromoteTo + MulAdd        ferry: cpu::gemv (avx2::gemv)
//     bf16        bf16 weights as ferry's driver runs them at <isa>:
//                   avx512 (AVX512_BF16 CPUs)  x rounded to bf16, vdpbf16ps      Highway: ReorderWidenMulAccumulate
//                   avx2                       f32 x, shift/mask + FMA           Highway: PromoteTo + MulAdd
//     bf16_f32x   Highway's f32-x kernel at its best target against ferry's f32-x path (ferry:avx2)
//     q8_0        q8_0 weights, x quantized per 32 to int8 + f32 scale (same bytes both sides), integer dot per
//                 block. Highway: int8 -> int16 PromoteTo + ReorderWidenMulAccumulate (vpmaddwd; 1.0.3 has no
//                 int8 dot op), ferry: cpu::quant_gemv (avx2: vpmaddubsw + vpmaddwd; avx512: VNNI vpdpbusd)
//   <target>: Highway's best target on this CPU (HWY_DYNAMIC_DISPATCH) or its AVX2 target (N_AVX2:: called
//   directly); <isa>: the ISA passed to ferry's driver, under ferry::ScopedIsa.
//
// Both sides run the same way: ferry's public drivers (gemv.cc, quant_linear.cc) and, for Highway, ferry's
// parallel_for over groups of 8 rows with the drivers' grain (L2 mode: the pool resized to one thread). Per-call
// work outside the row loop is timed on both sides (ferry: its own x rounding / quantization; Highway:
// ferry::convert to bf16 / a Highway quantizer). Every iteration times one ferry pass and one Highway pass, in
// alternating order; when streaming, on two weight copies half the rotation apart (≥ 256 MiB of copies, far more
// than the L3), and over the run both walk the same copies. Each copy's last results of both are compared at the
// end: any output differing by more than 1e-3 of max(|y_ferry|, mean |y_ferry|) fails the benchmark (error row,
// exit status 1).
// Counters (GB/s of weight bytes read; median and best of the passes):
//   hwy_GBps, ferry_GBps, *_best   hwy_over_ferry   median over iterations of t_ferry / t_hwy (> 1: Highway faster)
//
// Highway 1.0.3 (Debian 12's libhwy-dev) is dynamically dispatched within this one file (foreach_target.h,
// HWY_EXPORT). Its targets here: AVX2, AVX3, and AVX3_DL (opt-in, HWY_WANT_AVX3_DL: the Ice Lake / Zen 4 set);
// AVX3_ZEN4 does not exist before Highway 1.1.
// Built only where CMake finds Highway (bench/CMakeLists.txt). Run:
//   build-*/bench/bench_highway --benchmark_repetitions=3
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench_highway.cc"
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include <cstdint>

#include "ferry/core/convert.h"

#ifndef FERRY_BENCH_HIGHWAY_ONCE
#define FERRY_BENCH_HIGHWAY_ONCE
// One target's kernels. Row kernels compute y[n] for n in [n0, n1) of row-major weights [N, K].
struct HwyKernels {
  const char* target;
  void (*gemv_f16)(const void* w, int64_t K, const float* x, float* y, int64_t n0, int64_t n1);
  void (*gemv_bf16)(const void* w, int64_t K, const float* x, float* y, int64_t n0, int64_t n1);
  // x as bf16 (rounded once per call), pairs multiplied by ReorderWidenMulAccumulate.
  void (*gemv_bf16_bf16x)(const void* w, int64_t K, const uint16_t* x, float* y, int64_t n0, int64_t n1);
  // x[K] -> q[K] int8 and d[K / 32] (largest magnitude -> ±127, nearest even: ferry's bytes).
  void (*quantize_q8)(const float* x, int64_t K, int8_t* q, float* d);
  void (*gemv_q8_0)(const void* w, int64_t K, const int8_t* xq, const float* xd, float* y, int64_t n0, int64_t n1);
};
#endif

// ---- the kernels, compiled once per Highway target ------------------------------------------------------------
HWY_BEFORE_NAMESPACE();
namespace ferry_bench_hwy {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

inline float scalar_f32(hwy::float16_t v) { return ferry::f16_to_f32(v.bits); }
inline float scalar_f32(hwy::bfloat16_t v) { return hwy::F32FromBF16(v); }

// f16 or bf16 weights (T), f32 x: one row at a time (one sequential stream per thread, as ferry does for K ≤ 4096),
// four accumulators, each weight vector widened to f32 in registers.
template <typename T>
void GemvWiden(const void* w, int64_t K, const float* x, float* y, int64_t n0, int64_t n1) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<T, decltype(df)> dw;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t n = n0; n < n1; ++n) {
    const T* r = static_cast<const T*>(w) + n * K;
    auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
    int64_t k = 0;
    for (; k + 4 * L <= K; k += 4 * L) {
      a0 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dw, r + k)), hn::LoadU(df, x + k), a0);
      a1 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dw, r + k + L)), hn::LoadU(df, x + k + L), a1);
      a2 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dw, r + k + 2 * L)), hn::LoadU(df, x + k + 2 * L), a2);
      a3 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dw, r + k + 3 * L)), hn::LoadU(df, x + k + 3 * L), a3);
    }
    for (; k + L <= K; k += L) a0 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dw, r + k)), hn::LoadU(df, x + k), a0);
    float acc = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
    for (; k < K; ++k) acc += scalar_f32(r[k]) * x[k];
    y[n] = acc;
  }
}

void GemvF16(const void* w, int64_t K, const float* x, float* y, int64_t n0, int64_t n1) {
  GemvWiden<hwy::float16_t>(w, K, x, y, n0, n1);
}
void GemvBf16(const void* w, int64_t K, const float* x, float* y, int64_t n0, int64_t n1) {
  GemvWiden<hwy::bfloat16_t>(w, K, x, y, n0, n1);
}

// bf16 weights and bf16 x: Highway's bf16 dot product. 1.0.3 has no vdpbf16ps; on x86 it splits both operands into
// even/odd halves (shift, mask) and does two FMAs per bf16 vector, into the pairs of accumulators (s0, s1), (s2, s3).
void GemvBf16Bf16x(const void* w, int64_t K, const uint16_t* x, float* y, int64_t n0, int64_t n1) {
  const hn::ScalableTag<hwy::bfloat16_t> db;
  const hn::Repartition<float, decltype(db)> df;  // (the scalar target has one lane of each)
  const int64_t L = static_cast<int64_t>(hn::Lanes(db));
  const auto* xb = reinterpret_cast<const hwy::bfloat16_t*>(x);
  for (int64_t n = n0; n < n1; ++n) {
    const auto* r = static_cast<const hwy::bfloat16_t*>(w) + n * K;
    auto s0 = hn::Zero(df), s1 = hn::Zero(df), s2 = hn::Zero(df), s3 = hn::Zero(df);
    int64_t k = 0;
    for (; k + 2 * L <= K; k += 2 * L) {
      s0 = hn::ReorderWidenMulAccumulate(df, hn::LoadU(db, r + k), hn::LoadU(db, xb + k), s0, s1);
      s2 = hn::ReorderWidenMulAccumulate(df, hn::LoadU(db, r + k + L), hn::LoadU(db, xb + k + L), s2, s3);
    }
    const auto sum = hn::Add(hn::RearrangeToOddPlusEven(s0, s1), hn::RearrangeToOddPlusEven(s2, s3));
    float acc = hn::GetLane(hn::SumOfLanes(df, sum));
    for (; k < K; ++k) acc += hwy::F32FromBF16(r[k]) * hwy::F32FromBF16(xb[k]);
    y[n] = acc;
  }
}

// Per 32 values: d = max |x| / 127, q = nearest-even(x / d) (ferry's quantize_x computes the same float operations).
void QuantizeQ8(const float* x, int64_t K, int8_t* q, float* d) {
  const hn::CappedTag<float, 32> df;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t g = 0; g < K / 32; ++g) {
    const float* p = x + 32 * g;
    auto mx = hn::Zero(df);
    for (int64_t i = 0; i < 32; i += L) mx = hn::Max(mx, hn::Abs(hn::LoadU(df, p + i)));
    const float dg = hn::GetLane(hn::MaxOfLanes(df, mx)) / 127.0f, id = dg != 0.0f ? 1.0f / dg : 0.0f;
    for (int64_t i = 0; i < 32; i += L)
      hn::StoreU(hn::DemoteTo(d8, hn::NearestInt(hn::Mul(hn::LoadU(df, p + i), hn::Set(df, id)))), d8, q + 32 * g + i);
    d[g] = dg;
  }
}

// q8_0 weights (blocks of 34 bytes: f16 scale, 32 int8) against QuantizeQ8's activations. Per block: both sides'
// int8 widened to int16, multiplied pairwise into int32 (vpmaddwd), converted to f32 and scaled by d_w · d_x into
// acc; blocks alternate between two accumulators.
// (Tags derive from the narrowest type: on the scalar target every tag has one lane.)
template <class D16, class V>
HWY_INLINE V BlockQ8(D16 d16, const uint8_t* blk, const int8_t* xq, float xd, V acc) {
  const hn::Rebind<int8_t, D16> d8;
  const hn::Repartition<int32_t, D16> d32;
  const hn::Rebind<float, decltype(d32)> df;
  const hn::CappedTag<hwy::float16_t, 1> dh1;  // the block's f16 scale, one lane
  const hn::CappedTag<float, 1> df1;
  const auto* wq = reinterpret_cast<const int8_t*>(blk + 2);
  auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
  for (size_t i = 0; i < 32; i += hn::Lanes(d16))
    s0 = hn::ReorderWidenMulAccumulate(d32, hn::PromoteTo(d16, hn::LoadU(d8, wq + i)),
                                       hn::PromoteTo(d16, hn::LoadU(d8, xq + i)), s0, s1);
  const float dw = hn::GetLane(hn::PromoteTo(df1, hn::LoadU(dh1, reinterpret_cast<const hwy::float16_t*>(blk))));
  return hn::MulAdd(hn::ConvertTo(df, hn::RearrangeToOddPlusEven(s0, s1)), hn::Set(df, dw * xd), acc);
}

void GemvQ8_0(const void* w, int64_t K, const int8_t* xq, const float* xd, float* y, int64_t n0, int64_t n1) {
  const hn::CappedTag<int16_t, 32> d16;  // at most one block per vector
  const hn::Rebind<float, hn::Repartition<int32_t, decltype(d16)>> df;
  const int64_t blocks = K / 32;
  for (int64_t n = n0; n < n1; ++n) {
    const auto* row = static_cast<const uint8_t*>(w) + n * blocks * 34;
    auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
      acc0 = BlockQ8(d16, row + 34 * b, xq + 32 * b, xd[b], acc0);
      acc1 = BlockQ8(d16, row + 34 * (b + 1), xq + 32 * (b + 1), xd[b + 1], acc1);
    }
    if (b < blocks) acc0 = BlockQ8(d16, row + 34 * b, xq + 32 * b, xd[b], acc0);
    y[n] = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1)));
  }
}

HwyKernels TargetKernels() {
  return {hwy::TargetName(HWY_TARGET), &GemvF16, &GemvBf16, &GemvBf16Bf16x, &QuantizeQ8, &GemvQ8_0};
}

}  // namespace HWY_NAMESPACE
}  // namespace ferry_bench_hwy
HWY_AFTER_NAMESPACE();

// ---- the benchmark (compiled once) ----------------------------------------------------------------------------
#if HWY_ONCE
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "ferry/core/cpu_features.h"
#include "ferry/core/tensor.h"
#include "ferry/core/thread_pool.h"
#include "ops/cpu/linear_kernels.h"
#include "ops/cpu/quant_kernels.h"

namespace ferry_bench_hwy {
HWY_EXPORT(TargetKernels);
}  // namespace ferry_bench_hwy

namespace {

using namespace ferry;
using Clock = std::chrono::steady_clock;

constexpr int64_t kK = 4096;
constexpr int64_t kDramRows = 4096;  // streaming: 4096 × 4096 weights, copies totalling ≥ 256 MiB
constexpr int64_t kL2Rows = 128;     // L2-resident: one 128 × 4096 weight (≤ 1 MiB), one thread
bool g_failed = false;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Per-pass times of one side of a benchmark.
struct Passes {
  std::vector<double> s;
  void add(double t) { s.push_back(t); }
  double median() const {
    std::vector<double> v = s;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  }
  double best() const { return *std::min_element(s.begin(), s.end()); }
};

Tensor random_tensor(Shape shape, DType dtype, uint64_t seed) {
  Tensor f = Tensor::empty(std::move(shape), DType::F32);
  auto* p = f.data<float>();
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
  for (int64_t i = 0; i < f.numel(); ++i)
    s ^= s << 13, s ^= s >> 7, s ^= s << 17, p[i] = static_cast<float>(s >> 40) / 16777216.0f - 0.5f;
  return f.to(dtype);
}

// Distinct random N × kK weights: for the streaming shape, copies totalling ≥ 256 MiB (far more than the L3), else
// one. Made once per (dtype, N); repetitions reuse them.
const std::vector<Tensor>& weight_copies(DType dtype, int64_t N) {
  static std::map<std::pair<DType, int64_t>, std::vector<Tensor>> cache;
  auto& c = cache[{dtype, N}];
  if (c.empty()) {
    const double bytes = double(N) * double(dtype_nbytes(dtype, kK));
    const int copies = N == kDramRows ? std::max(4, static_cast<int>((double(256 << 20) + bytes - 1) / bytes)) : 1;
    for (int i = 0; i < copies; ++i) c.push_back(random_tensor({N, kK}, dtype, static_cast<uint64_t>(i + 1)));
  }
  return c;
}

enum class Kind { F16, BF16, BF16_F32X, Q8_0 };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::F16: return "f16";
    case Kind::BF16: return "bf16";
    case Kind::BF16_F32X: return "bf16_f32x";
    default: return "q8_0";
  }
}
DType kind_dtype(Kind k) { return k == Kind::F16 ? DType::F16 : k == Kind::Q8_0 ? DType::Q8_0 : DType::BF16; }

// Rows [0, N) in groups of 8 on ferry's pool, chunks of at least ~64 KiB of weights: gemv.cc's split.
template <class F>
void for_row_groups(int64_t N, int64_t row_bytes, const F& fn) {
  constexpr int64_t kGroup = 8;
  const int64_t grain = std::max<int64_t>(1, (int64_t{64} << 10) / (row_bytes * kGroup));
  parallel_for(0, (N + kGroup - 1) / kGroup, grain,
               [&](int64_t g0, int64_t g1) { fn(g0 * kGroup, std::min(g1 * kGroup, N)); });
}

// One Highway pass: y = w · x (w: N × kK) with kernel `kind` of `hk`, per-call preparation of x included.
void hwy_pass(const HwyKernels& hk, Kind kind, const void* w, int64_t N, const float* x, float* y) {
  // x's per-call forms (a thread_local named inside the lambdas would be the pool thread's own, empty, copy).
  thread_local std::vector<uint16_t> xb_buf(kK);
  thread_local std::vector<int8_t> xq_buf(kK);
  thread_local std::vector<float> xd_buf(kK / 32);
  uint16_t* xb = xb_buf.data();
  int8_t* xq = xq_buf.data();
  float* xd = xd_buf.data();
  const auto row_bytes = static_cast<int64_t>(dtype_nbytes(kind_dtype(kind), kK));
  switch (kind) {
    case Kind::F16:
      return for_row_groups(N, row_bytes, [&](int64_t n0, int64_t n1) { hk.gemv_f16(w, kK, x, y, n0, n1); });
    case Kind::BF16_F32X:
      return for_row_groups(N, row_bytes, [&](int64_t n0, int64_t n1) { hk.gemv_bf16(w, kK, x, y, n0, n1); });
    case Kind::BF16:
      if (ops::cpu::use_bf16_kernels(cpu_isa(), DType::BF16)) {  // ferry's semantics at this ISA: x rounded to bf16
        convert(x, DType::F32, xb, DType::BF16, kK);
        return for_row_groups(N, row_bytes,
                              [&](int64_t n0, int64_t n1) { hk.gemv_bf16_bf16x(w, kK, xb, y, n0, n1); });
      }
      return for_row_groups(N, row_bytes, [&](int64_t n0, int64_t n1) { hk.gemv_bf16(w, kK, x, y, n0, n1); });
    case Kind::Q8_0:
      hk.quantize_q8(x, kK, xq, xd);
      return for_row_groups(N, row_bytes,
                            [&](int64_t n0, int64_t n1) { hk.gemv_q8_0(w, kK, xq, xd, y, n0, n1); });
  }
}

// One ferry pass through its public drivers, at the ISA currently set (ScopedIsa).
void ferry_pass(Kind kind, const void* w, int64_t N, const float* x, float* y) {
  if (kind == Kind::Q8_0) return ops::cpu::quant_gemv(cpu_isa(), DType::Q8_0, w, N, kK, 1, x, nullptr, y);
  ops::cpu::gemv(cpu_isa(), kind_dtype(kind), w, N, kK, x, nullptr, y);
}

// The largest |a - b| over max(|b|, mean |b|).
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double mean = 0, worst = 0;
  for (float v : b) mean += std::fabs(v);
  mean /= double(b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])) / std::max<double>(std::fabs(b[i]), mean));
  return worst;
}

// N = kDramRows: both sides multi-threaded, weights streamed from DRAM. N = kL2Rows: one thread (ferry's pool
// resized to 1, so its drivers and for_row_groups run inline), the same weight every pass, resident in L2: the
// kernels' instruction throughput rather than the memory system.
void BM_HwyVsFerry(benchmark::State& state, Kind kind, HwyKernels hk, Isa ferry_isa, int64_t N) {
  ScopedIsa isa(ferry_isa);
  // bf16_f32x compares f32-x kernels only: ferry's f32 path is its AVX2 one (the AVX512 one rounds x).
  if (kind == Kind::BF16_F32X && ops::cpu::use_bf16_kernels(ferry_isa, DType::BF16))
    return state.SkipWithError("bf16_f32x needs ferry's f32-x bf16 path (ferry:AVX2)");
  const int threads = num_threads();
  if (N == kL2Rows) set_num_threads(1);
  const auto& w = weight_copies(kind_dtype(kind), N);
  const int copies = static_cast<int>(w.size());
  const Tensor x = random_tensor({kK}, DType::F32, 99);
  std::vector<std::vector<float>> y_hwy(copies, std::vector<float>(N)), y_ferry = y_hwy;
  for (int c = 0; c < copies; ++c) {  // warm up (pool, thread-local buffers, page mappings)
    hwy_pass(hk, kind, w[c].raw_data(), N, x.data<float>(), y_hwy[c].data());
    ferry_pass(kind, w[c].raw_data(), N, x.data<float>(), y_ferry[c].data());
  }
  Passes hwy, fer;
  std::vector<double> ratio;
  int64_t i = 0;
  for (auto _ : state) {
    const int cf = static_cast<int>(i % copies), ch = (cf + copies / 2) % copies;
    double th = 0, tf = 0;
    for (int side = 0; side < 2; ++side) {
      const auto t0 = Clock::now();
      if ((side == 0) == (i % 2 == 0)) {
        ferry_pass(kind, w[cf].raw_data(), N, x.data<float>(), y_ferry[cf].data());
        tf = seconds_since(t0);
      } else {
        hwy_pass(hk, kind, w[ch].raw_data(), N, x.data<float>(), y_hwy[ch].data());
        th = seconds_since(t0);
      }
    }
    state.SetIterationTime(th);
    hwy.add(th), fer.add(tf), ratio.push_back(tf / th);
    ++i;
  }
  set_num_threads(threads);
  double worst = 0;
  for (int c = 0; c < copies; ++c) worst = std::max(worst, max_rel_diff(y_hwy[c], y_ferry[c]));
  if (worst > 1e-3) {
    g_failed = true;
    std::fprintf(stderr, "bench_highway: MISMATCH %s: Highway %s vs ferry %s differ by %.3g relative (> 1e-3)\n",
                 kind_name(kind), hk.target, std::string(isa_name(ferry_isa)).c_str(), worst);
    return state.SkipWithError("Highway and ferry results differ by more than 1e-3 relative");
  }
  const double gb = double(N) * double(dtype_nbytes(kind_dtype(kind), kK)) / 1e9;
  std::nth_element(ratio.begin(), ratio.begin() + static_cast<std::ptrdiff_t>(ratio.size() / 2), ratio.end());
  state.counters["hwy_GBps"] = gb / hwy.median();
  state.counters["ferry_GBps"] = gb / fer.median();
  state.counters["hwy_GBps_best"] = gb / hwy.best();
  state.counters["ferry_GBps_best"] = gb / fer.best();
  state.counters["hwy_over_ferry"] = ratio[ratio.size() / 2];
  state.counters["max_rel_diff"] = worst;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const HwyKernels best = HWY_DYNAMIC_DISPATCH(ferry_bench_hwy::TargetKernels)();
  std::vector<HwyKernels> targets{best};
#if HWY_TARGETS & HWY_AVX2
  if ((hwy::SupportedTargets() & HWY_AVX2) && best.target != std::string("AVX2"))
    targets.push_back(ferry_bench_hwy::N_AVX2::TargetKernels());
#endif
  std::string supported;
  for (int64_t t = hwy::SupportedTargets() & HWY_TARGETS; t != 0; t &= t - 1)
    supported += std::string(supported.empty() ? "" : ",") + hwy::TargetName(t & -t);
  const Isa native = cpu_isa();
  benchmark::AddCustomContext("hwy_supported_targets", supported);
  benchmark::AddCustomContext("ferry_isa", std::string(isa_name(native)));
  benchmark::AddCustomContext("ferry_threads", std::to_string(num_threads()));
  benchmark::AddCustomContext("ferry_bf16_at_native_isa", ops::cpu::use_bf16_kernels(native, DType::BF16)
                                                              ? "avx512bf16::gemv, x rounded to bf16 (vdpbf16ps)"
                                                              : "f32 path (x in f32)");
  // Pairings: Highway's best target against ferry's native ISA, its AVX2 target against ferry capped at AVX2.
  const Isa avx2 = std::min(native, Isa::AVX2);
  for (int64_t N : {kDramRows, kL2Rows}) {
    const auto add = [N](Kind kind, const HwyKernels& hk, Isa isa) {
      const std::string name = std::string(N == kDramRows ? "HwyVsFerry/" : "HwyVsFerryL2/") + kind_name(kind) +
                               "/hwy:" + hk.target + "/ferry:" + std::string(isa_name(isa));
      benchmark::RegisterBenchmark(name.c_str(), BM_HwyVsFerry, kind, hk, isa, N)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    };
    for (Kind kind : {Kind::F16, Kind::BF16, Kind::Q8_0}) {
      add(kind, targets.front(), native);
      if (targets.size() > 1) add(kind, targets.back(), avx2);
    }
    add(Kind::BF16_F32X, targets.front(), avx2);  // (at Highway's AVX2 target this is bf16/hwy:AVX2/ferry:avx2)
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return g_failed ? 1 : 0;
}
#endif  // HWY_ONCE
