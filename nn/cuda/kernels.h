// The elementwise kernels of the layers and the loss, on contiguous device float arrays, each
// queued on `stream` (asynchronous; a bad launch throws CudaError). One thread per element,
// grid-stride loops; each kernel mirrors the nn/cpu function of the same name, so the CUDA
// layer tests compare them one to one. Compiled by nvcc in kernels.cu.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace murmur::nn::cuda {

// y = max(0, x) (y may be x).
void relu(float* y, const float* x, std::int64_t n, cudaStream_t stream);
// gx = gy * (y > 0) (gx may be gy).
void relu_backward(float* gx, const float* gy, const float* y, std::int64_t n,
                   cudaStream_t stream);
// Exact GELU, 0.5 x (1 + erf(x / sqrt 2)), and gx = gy * (Phi(x) + x phi(x)).
void gelu(float* y, const float* x, std::int64_t n, cudaStream_t stream);
void gelu_backward(float* gx, const float* gy, const float* x, std::int64_t n,
                   cudaStream_t stream);
// y[i, j] += bias[j] over `rows` rows of `cols`, then max(0, .) if relu; bias may be null.
void add_bias(float* y, const float* bias, std::int64_t rows, std::int64_t cols, bool relu,
              cudaStream_t stream);
// y[b, c, i] += bias[c] over [batch, channels, plane], then max(0, .) if relu; bias may be null.
void add_channel_bias(float* y, const float* bias, std::int64_t batch, std::int64_t channels,
                      std::int64_t plane, bool relu, cudaStream_t stream);
// out[j] (+)= sum_i g[i, j]: the Linear bias gradient.
void column_sums(float* out, const float* g, std::int64_t rows, std::int64_t cols,
                 bool accumulate, cudaStream_t stream);
// out[c] (+)= sum_{b, i} g[b, c, i]: the Conv2d bias gradient.
void channel_sums(float* out, const float* g, std::int64_t batch, std::int64_t channels,
                  std::int64_t plane, bool accumulate, cudaStream_t stream);
// Inverted dropout: mask[i] = 1/(1-p) with probability 1-p else 0, from a counter-based hash
// of (seed, i); y = x * mask (y may be x).
void dropout(float* y, float* mask, const float* x, std::int64_t n, double p, std::uint64_t seed,
             cudaStream_t stream);
// y = x * m (y may be x).
void multiply(float* y, const float* x, const float* m, std::int64_t n, cudaStream_t stream);
// x[0] += value (BatchNorm's num_batches_tracked).
void add_scalar(float* x, float value, cudaStream_t stream);

// What the loss kernel leaves on the device for the host to read after a sync.
struct LossSums {
  double loss_sum;  // sum over rows of -log softmax(logits)[label]
  int correct;      // rows whose first maximum is at the label
  int bad_row;      // first row whose label is outside [0, classes), or -1
  int bad_label;
  int pad;
};
// Softmax cross-entropy of [rows, classes] logits (one block; rows are loop-shared by its
// threads, classes are few). If grad is non-null writes (softmax - onehot) / rows into it.
// Writes the sums into *result (device memory).
void softmax_cross_entropy(const float* logits, const std::int32_t* labels, std::int64_t rows,
                           std::int64_t classes, float* grad, LossSums* result,
                           cudaStream_t stream);

}  // namespace murmur::nn::cuda
