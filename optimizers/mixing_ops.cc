#include "optimizers/mixing_ops.h"

#include <algorithm>
#include <cstring>

namespace murmur::optimizers {

namespace {
// 16 KiB of output per block: with a handful of inputs the block stays in L1/L2 while every
// input streams through it once.
constexpr std::size_t kBlock = 4096;
}  // namespace

void mix(std::span<float> x, float self, std::span<const float* const> inputs,
         std::span<const float> weights) {
  const std::size_t n = x.size(), m = inputs.size();
  float* __restrict out = x.data();
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t e = std::min(n, b + kBlock);
    for (std::size_t i = b; i < e; ++i) out[i] *= self;
    for (std::size_t k = 0; k < m; ++k) {
      const float* __restrict in = inputs[k];
      const float w = weights[k];
      for (std::size_t i = b; i < e; ++i) out[i] += w * in[i];
    }
  }
}

void axpy(std::span<float> y, float a, std::span<const float> x) {
  float* __restrict out = y.data();
  const float* __restrict in = x.data();
  for (std::size_t i = 0, n = y.size(); i < n; ++i) out[i] += a * in[i];
}

void add_scaled_diff(std::span<float> y, float a, std::span<const float> u,
                     std::span<const float> v) {
  float* __restrict out = y.data();
  const float* __restrict p = u.data();
  const float* __restrict q = v.data();
  for (std::size_t i = 0, n = y.size(); i < n; ++i) out[i] += a * (p[i] - q[i]);
}

void scale(std::span<float> x, float a) {
  for (float& v : x) v *= a;
}

void copy(std::span<float> out, std::span<const float> x) {
  if (!x.empty() && out.data() != x.data()) std::memcpy(out.data(), x.data(), x.size_bytes());
}

double squared_distance(std::span<const float> x, std::span<const float> y) {
  double s = 0;
  for (std::size_t i = 0, n = x.size(); i < n; ++i) {
    const double d = static_cast<double>(x[i]) - y[i];
    s += d * d;
  }
  return s;
}

}  // namespace murmur::optimizers
