// Elementwise ops and activations: every ISA against double-precision formulas on odd lengths, the AVX2 path
// against the scalar one (misaligned too), broadcasting, in-place forms, special values, and errors.
#include "ferry/ops/elementwise.h"

#include <gmock/gmock.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ferry/core/mapped_file.h"
#include "ops/op_test_util.h"

namespace ferry::ops {
namespace {

using ::testing::HasSubstr;
using namespace ferry::ops::optest;

std::vector<double> map_ref(const std::vector<float>& x, double (*f)(double)) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  return y;
}

double silu_ref(double x) { return x / (1 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double relu_ref(double x) { return x > 0 || std::isnan(x) ? x : 0; }

struct Activation {
  const char* name;
  Tensor (*op)(const Tensor&);
  double (*ref)(double);
};
const Activation kActivations[] = {{"silu", silu, silu_ref},
                                   {"gelu", gelu, gelu_ref},
                                   {"gelu_tanh", gelu_tanh, gelu_tanh_ref},
                                   {"gelu_new", gelu_new, gelu_tanh_ref},
                                   {"relu", relu, relu_ref}};

// Values where the activations bend, saturate or overflow, plus the IEEE specials.
std::vector<float> special_values() {
  return {0.0f, -0.0f, 1e-30f, -1e-30f, 0.5f, -0.5f, 3.0f, -3.0f, 5.5f, -5.5f, 9.0f, -9.0f, 15.0f, -15.0f,
          30.0f, -30.0f, 88.0f, -88.0f, 100.0f, -100.0f, 1e10f, -1e10f, INFINITY, -INFINITY, NAN};
}

TEST(Activations, EveryIsaMatchesDoublePrecisionFormula) {
  for (const auto& act : kActivations)
    for (int64_t n : kOddSizes) {
      SCOPED_TRACE(::testing::Message() << act.name << " n=" << n);
      auto v = random_floats(n, 11, -8.0f, 8.0f);
      Tensor x = Tensor::from_vector(v, {n});
      const auto want = map_ref(v, act.ref);
      for_each_isa([&](Isa) { EXPECT_TRUE(all_close(act.op(x).to_vector<float>(), want, 2e-6, 1e-7)); });
    }
}

TEST(Activations, SpecialValuesAgreeAcrossIsas) {
  for (const auto& act : kActivations) {
    SCOPED_TRACE(act.name);
    auto v = special_values();
    Tensor x = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
    const auto want = with_scalar([&] { return act.op(x).to_vector<float>(); });
    // The scalar path is PyTorch's formula in f32: e.g. silu(-inf) = -inf / inf = NaN, gelu(inf) = inf.
    EXPECT_TRUE(all_close(want, map_ref(v, act.ref), 2e-6, 1e-7));
    for_each_isa([&](Isa) { EXPECT_TRUE(all_close(act.op(x).to_vector<float>(), want, 2e-6, 1e-7)); });
  }
}

TEST(Activations, AvxMatchesScalarOnMisalignedInput) {
  for (const auto& act : kActivations)
    for (int64_t n : {1, 7, 9, 33, 4097}) {
      SCOPED_TRACE(::testing::Message() << act.name << " n=" << n);
      Tensor x = misaligned(random_tensor({n}, DType::F32, 12, -20.0f, 20.0f));
      const auto want = with_scalar([&] { return act.op(x).to_vector<float>(); });
      for_each_isa([&](Isa) { EXPECT_TRUE(all_close(act.op(x).to_vector<float>(), want, 2e-6, 1e-7)); });
    }
}

TEST(Activations, SiluMulFusesBothSteps) {
  for (int64_t n : kOddSizes) {
    SCOPED_TRACE(n);
    auto g = random_floats(n, 13, -6, 6), u = random_floats(n, 14, -2, 2);
    std::vector<double> want(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) want[i] = silu_ref(g[i]) * u[i];
    Tensor gt = Tensor::from_vector(g, {1, n}), ut = Tensor::from_vector(u, {1, n});
    for_each_isa([&](Isa) { EXPECT_TRUE(all_close(silu_mul(gt, ut).to_vector<float>(), want, 2e-6, 1e-7)); });
  }
  EXPECT_THAT(error_of([] { silu_mul(Tensor::zeros({2, 3}, DType::F32), Tensor::zeros({3, 2}, DType::F32)); }),
              HasSubstr("differ in shape"));
}

// Gemma's final_logit_softcapping: cap · tanh(x / cap), against double precision; the cap must be positive.
TEST(Activations, SoftcapIsCapTimesTanhOfXOverCap) {
  Tensor x = random_tensor({3, 257}, DType::F32, 7, -200, 200);
  const std::vector<float> xs = x.to_vector<float>();
  std::vector<double> want(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) want[i] = 30.0 * std::tanh(xs[i] / 30.0);
  const Tensor y = softcap(x, 30.0f);
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_TRUE(all_close(y.to_vector<float>(), want, 1e-6, 1e-5));
  EXPECT_THAT(error_of([&] { softcap(x, 0.0f); }), HasSubstr("cap must be positive"));
  EXPECT_THAT(error_of([&] { softcap(x.to(DType::BF16), 1.0f); }), HasSubstr("ops::softcap"));
}

TEST(Activations, ShapeIsKeptAndNonF32IsRejected) {
  Tensor x = random_tensor({2, 3, 5}, DType::F32, 1);
  EXPECT_EQ(silu(x).shape(), x.shape());
  EXPECT_EQ(gelu(Tensor::empty({0, 4}, DType::F32)).shape(), (Shape{0, 4}));
  std::string msg = error_of([&] { gelu(x.to(DType::BF16)); });
  EXPECT_THAT(msg, HasSubstr("ops::gelu"));
  EXPECT_THAT(msg, HasSubstr("bf16 [2, 3, 5]"));
}

// ---- binary ops ------------------------------------------------------------------------------------------------

std::vector<double> binary_ref(const std::vector<float>& a, const std::vector<float>& b, bool multiply) {
  std::vector<double> y(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double bv = b[i % b.size()];
    y[i] = multiply ? double(a[i]) * bv : double(a[i]) + bv;
  }
  return y;
}

TEST(Binary, SameShapeAndBroadcastMatchReference) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{1}, {1}},          {{7}, {7}},       {{4097}, {4097}}, {{33, 7}, {7}},   {{5, 300}, {300}},
      {{2, 3, 9}, {3, 9}}, {{3, 4, 5}, {}},  {{4097}, {}},     {{1000, 1}, {1}}, {{2, 2000}, {2, 2000}}};
  for (const auto& shape_pair : shapes) {
    const Shape as = shape_pair.first, bs = shape_pair.second;  // named copies: lambdas below capture them
    SCOPED_TRACE(shape_str(as) + " with " + shape_str(bs));
    Tensor a = random_tensor(as, DType::F32, 1), b = random_tensor(bs, DType::F32, 2);
    auto av = a.to_vector<float>(), bv = b.to_vector<float>();
    for_each_isa([&](Isa) {
      // Single f32 operations are exact roundings of the double result: compare with one rounding's slack.
      EXPECT_TRUE(all_close(add(a, b).to_vector<float>(), binary_ref(av, bv, false), 6e-8, 0));
      EXPECT_TRUE(all_close(mul(a, b).to_vector<float>(), binary_ref(av, bv, true), 6e-8, 0));
      Tensor c = a.clone();
      add_(c, b);
      EXPECT_TRUE(all_close(c.to_vector<float>(), binary_ref(av, bv, false), 6e-8, 0));
      Tensor d = a.clone();
      mul_(d, b);
      EXPECT_TRUE(all_close(d.to_vector<float>(), binary_ref(av, bv, true), 6e-8, 0));
      EXPECT_EQ(add(a, b).shape(), as);
    });
  }
}

TEST(Binary, ScaleAndSelfAliasing) {
  for (int64_t n : kOddSizes) {
    Tensor a = misaligned(random_tensor({n}, DType::F32, 3));
    auto av = a.to_vector<float>();
    std::vector<double> twice(av.size()), squared(av.size()), scaled(av.size());
    for (std::size_t i = 0; i < av.size(); ++i)
      twice[i] = 2.0 * av[i], squared[i] = double(av[i]) * av[i], scaled[i] = double(av[i]) * -0.37f;
    for_each_isa([&](Isa) {
      EXPECT_TRUE(all_close(scale(a, -0.37f).to_vector<float>(), scaled, 6e-8, 0));
      Tensor c = a.clone();
      add_(c, c);  // b is exactly a: each element is read before it is written
      EXPECT_TRUE(all_close(c.to_vector<float>(), twice, 0, 0));
      Tensor d = a.clone();
      mul_(d, d);
      EXPECT_TRUE(all_close(d.to_vector<float>(), squared, 6e-8, 0));
    });
  }
}

TEST(Binary, ErrorsNameTheShapes) {
  Tensor a = Tensor::zeros({2, 3}, DType::F32);
  std::string msg = error_of([&] { add(a, Tensor::zeros({2}, DType::F32)); });
  EXPECT_THAT(msg, HasSubstr("ops::add"));
  EXPECT_THAT(msg, HasSubstr("[2]"));
  EXPECT_THAT(msg, HasSubstr("[2, 3]"));
  EXPECT_THAT(error_of([&] { mul(a, Tensor::zeros({1, 2, 3}, DType::F32)); }), HasSubstr("does not broadcast"));
  EXPECT_THAT(error_of([&] { add(a, Tensor::zeros({3}, DType::F16)); }), HasSubstr("must be f32"));
  Tensor big = Tensor::zeros({4, 3}, DType::F32);
  Tensor rows = big.slice(1, 3);  // overlaps big's rows 1..2 without being the same tensor
  Tensor view = big.slice(0, 2);
  EXPECT_THAT(error_of([&] { add_(view, rows); }), HasSubstr("overlaps"));
}

TEST(Binary, InPlaceOnReadOnlyViewIsRejected) {
  const auto path = std::filesystem::temp_directory_path() / "ferry_ops_readonly_test.bin";
  {
    std::ofstream f(path, std::ios::binary);
    const float v[4] = {1, 2, 3, 4};
    f.write(reinterpret_cast<const char*>(v), sizeof v);
  }
  auto file = MappedFile::open(path);
  Tensor ro = Tensor::from_storage(Storage::view(file, 0, 16), 0, {4}, DType::F32);
  EXPECT_THAT(error_of([&] { add_(ro, Tensor::zeros({4}, DType::F32)); }), HasSubstr("read-only"));
  EXPECT_EQ(add(ro, ro).to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));  // reading it is fine
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ferry::ops
