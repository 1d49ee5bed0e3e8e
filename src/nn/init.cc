// Parameter initialisation for layer constructors: constants, and seeded uniform/normal draws from one
// process-wide generator (splitmix64; Box-Muller for normals). Deterministic for a given seed and construction
// order, which is all tests need; real values come from checkpoints.
#include "ferry/nn/init.h"

#include <cmath>
#include <mutex>
#include <vector>

namespace ferry::nn {

namespace {

struct Generator {
  std::mutex mutex;
  uint64_t state = 0;

  uint64_t next() {  // splitmix64: a full-period 64-bit generator, good enough for initial weights
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

Generator& generator() {
  static Generator g;
  return g;
}

void fill_random(std::vector<float>& out, const TensorInit& init) {
  Generator& g = generator();
  std::lock_guard lock(g.mutex);
  if (init.kind == TensorInit::Kind::Uniform) {
    for (float& v : out) v = static_cast<float>(init.a + (init.b - init.a) * g.uniform01());
    return;
  }
  constexpr double two_pi = 6.283185307179586;
  for (std::size_t i = 0; i < out.size(); i += 2) {
    const double u1 = 1.0 - g.uniform01();  // (0, 1]: log is finite
    const double u2 = g.uniform01();
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(init.a + init.b * r * std::cos(two_pi * u2));
    if (i + 1 < out.size()) out[i + 1] = static_cast<float>(init.a + init.b * r * std::sin(two_pi * u2));
  }
}

}  // namespace

void manual_seed(uint64_t seed) {
  Generator& g = generator();
  std::lock_guard lock(g.mutex);
  g.state = seed;
}

Tensor make_tensor(const Shape& shape, DType dtype, Device device, const TensorInit& init) {
  if (device.is_meta()) return Tensor::empty(shape, dtype, device);
  switch (init.kind) {
    case TensorInit::Kind::Zeros: return Tensor::zeros(shape, dtype, device);
    case TensorInit::Kind::Full: return Tensor::full(shape, init.a, dtype, device);
    case TensorInit::Kind::Uniform:
    case TensorInit::Kind::Normal: break;
  }
  std::vector<float> values(static_cast<std::size_t>(shape_numel(shape)));
  fill_random(values, init);
  return Tensor::from_vector(values, shape, dtype).to(device);
}

}  // namespace ferry::nn
