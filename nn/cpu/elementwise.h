// Elementwise and row-broadcast kernels on contiguous float arrays, written so g++ -O3
// vectorizes them. Single-threaded: they are memory-bound and small next to the GEMMs.
#pragma once

#include <cstdint>

namespace murmur::nn::cpu {

// y[i, j] = x[i, j] + bias[j] (y may be x), for `rows` rows of `cols`; bias may be null.
void add_bias(float* y, const float* x, const float* bias, std::int64_t rows, std::int64_t cols);
// y[i, j] = max(0, x[i, j] + bias[j]) (y may be x); bias may be null.
void add_bias_relu(float* y, const float* x, const float* bias, std::int64_t rows,
                   std::int64_t cols);
// gx = gy * (y > 0) (gx may be gy); y is the ReLU output (or input: the sign is the same).
void relu_backward(float* gx, const float* gy, const float* y, std::int64_t n);
void relu(float* y, const float* x, std::int64_t n);
// Exact GELU and its derivative: gx = gy * (Phi(x) + x phi(x)).
void gelu(float* y, const float* x, std::int64_t n);
void gelu_backward(float* gx, const float* gy, const float* x, std::int64_t n);
// out[j] (+)= sum_i g[i, j] (the bias gradient); overwrites when accumulate is false.
void column_sums(float* out, const float* g, std::int64_t rows, std::int64_t cols,
                 bool accumulate);
// y = x * m (y may be x).
void multiply(float* y, const float* x, const float* m, std::int64_t n);
// y += alpha * x.
void axpy(float* y, float alpha, const float* x, std::int64_t n);

}  // namespace murmur::nn::cpu
