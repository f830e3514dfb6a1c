#include "nn/cpu/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

namespace murmur::nn::cpu {

void add_bias(float* y, const float* x, const float* bias, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t i = 0; i < rows; ++i) {
    float* __restrict yr = y + i * cols;
    const float* xr = x + i * cols;
    if (bias == nullptr) {
      if (yr != xr) std::memcpy(yr, xr, cols * sizeof(float));
      continue;
    }
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = xr[j] + bias[j];
  }
}

void add_bias_relu(float* y, const float* x, const float* bias, std::int64_t rows,
                   std::int64_t cols) {
  for (std::int64_t i = 0; i < rows; ++i) {
    float* yr = y + i * cols;
    const float* xr = x + i * cols;
    if (bias == nullptr) {
      for (std::int64_t j = 0; j < cols; ++j) yr[j] = std::max(xr[j], 0.0f);
    } else {
      for (std::int64_t j = 0; j < cols; ++j) yr[j] = std::max(xr[j] + bias[j], 0.0f);
    }
  }
}

void relu_backward(float* gx, const float* gy, const float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) gx[i] = y[i] > 0.0f ? gy[i] : 0.0f;
}

void relu(float* y, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
}

void gelu(float* y, const float* x, std::int64_t n) {
  // Double inside: erf in float loses the last bits that the gradient check compares.
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v * std::numbers::sqrt2 / 2)));
  }
}

void gelu_backward(float* gx, const float* gy, const float* x, std::int64_t n) {
  const double inv_sqrt_2pi = 0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double cdf = 0.5 * (1.0 + std::erf(v * std::numbers::sqrt2 / 2));
    const double pdf = inv_sqrt_2pi * std::exp(-0.5 * v * v);
    gx[i] = static_cast<float>(gy[i] * (cdf + v * pdf));
  }
}

void column_sums(float* out, const float* g, std::int64_t rows, std::int64_t cols,
                 bool accumulate) {
  if (!accumulate) std::memset(out, 0, cols * sizeof(float));
  // Row by row, so the inner loop is contiguous and vectorizes.
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* gr = g + i * cols;
    for (std::int64_t j = 0; j < cols; ++j) out[j] += gr[j];
  }
}

void multiply(float* y, const float* x, const float* m, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * m[i];
}

void axpy(float* y, float alpha, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace murmur::nn::cpu
