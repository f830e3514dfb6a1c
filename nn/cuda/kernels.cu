// The layer and loss kernels of nn/cuda/kernels.h. Kept plain: one thread per element with a
// grid-stride loop; the two reductions use one block per output and a shared-memory tree.
#include "nn/cuda/kernels.h"

#include <cfloat>

#include "device/cuda/launch.h"

namespace murmur::nn::cuda {

using device::cuda::block_sum;
using device::cuda::check_launch;
using device::cuda::grid_for;
using device::cuda::grid_index;
using device::cuda::grid_stride;
using device::cuda::kBlock;
namespace {

__global__ void relu_kernel(float* y, const float* x, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void relu_backward_kernel(float* gx, const float* gy, const float* y, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) gx[i] = y[i] > 0.0f ? gy[i] : 0.0f;
}

// Double inside, as the CPU version: the cost is invisible next to the GEMMs.
__global__ void gelu_kernel(float* y, const float* x, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    const double v = x[i];
    y[i] = static_cast<float>(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
  }
}

__global__ void gelu_backward_kernel(float* gx, const float* gy, const float* x, std::int64_t n) {
  const double inv_sqrt_2pi = 0.39894228040143267794;
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    const double v = x[i];
    const double cdf = 0.5 * (1.0 + erf(v * 0.70710678118654752440));
    const double pdf = inv_sqrt_2pi * exp(-0.5 * v * v);
    gx[i] = static_cast<float>(gy[i] * (cdf + v * pdf));
  }
}

__global__ void add_bias_kernel(float* y, const float* bias, std::int64_t rows, std::int64_t cols,
                                bool relu) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    float v = y[i] + (bias != nullptr ? bias[i % cols] : 0.0f);
    y[i] = relu && !(v > 0.0f) ? 0.0f : v;
  }
}

__global__ void add_channel_bias_kernel(float* y, const float* bias, std::int64_t batch,
                                        std::int64_t channels, std::int64_t plane, bool relu) {
  const std::int64_t n = batch * channels * plane;
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    float v = y[i] + (bias != nullptr ? bias[(i / plane) % channels] : 0.0f);
    y[i] = relu && !(v > 0.0f) ? 0.0f : v;
  }
}

// One block per column: its threads walk the rows, then a tree sum in shared memory. Float
// partial sums per thread, as the CPU's column_sums accumulates in float.
__global__ void column_sums_kernel(float* out, const float* g, std::int64_t rows,
                                   std::int64_t cols, bool accumulate) {
  __shared__ float partial[kBlock];
  const std::int64_t j = blockIdx.x;
  float s = 0.0f;
  for (std::int64_t i = threadIdx.x; i < rows; i += blockDim.x) s += g[i * cols + j];
  const float total = block_sum(s, partial);
  if (threadIdx.x == 0) out[j] = accumulate ? out[j] + total : total;
}

// One block per channel, over every (sample, position) of that channel.
__global__ void channel_sums_kernel(float* out, const float* g, std::int64_t batch,
                                    std::int64_t channels, std::int64_t plane, bool accumulate) {
  __shared__ float partial[kBlock];
  const std::int64_t c = blockIdx.x;
  const std::int64_t count = batch * plane;
  float s = 0.0f;
  for (std::int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const std::int64_t b = k / plane, i = k % plane;
    s += g[(b * channels + c) * plane + i];
  }
  const float total = block_sum(s, partial);
  if (threadIdx.x == 0) out[c] = accumulate ? out[c] + total : total;
}

// splitmix64 of (seed, index): independent of the launch shape, so a seed gives one mask.
__device__ std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void dropout_kernel(float* y, float* mask, const float* x, std::int64_t n, double p,
                               float scale, std::uint64_t seed) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    const std::uint64_t bits = mix64(seed + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(i + 1));
    const double u = static_cast<double>(bits >> 11) * 0x1.0p-53;
    const float m = u >= p ? scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

__global__ void multiply_kernel(float* y, const float* x, const float* m, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) y[i] = x[i] * m[i];
}

__global__ void add_scalar_kernel(float* x, float value) { x[0] += value; }

// One block; each thread takes rows (classes are few: 10 here), sums in double as the CPU.
__global__ void softmax_cross_entropy_kernel(const float* logits, const std::int32_t* labels,
                                             std::int64_t rows, std::int64_t classes, float* grad,
                                             LossSums* result) {
  __shared__ double loss_part[kBlock];
  __shared__ int correct_part[kBlock];
  __shared__ int bad_part[kBlock];
  double loss = 0.0;
  int correct = 0;
  int bad = static_cast<int>(rows);  // the smallest bad row this thread saw; rows = none
  const double inv_n = rows > 0 ? 1.0 / static_cast<double>(rows) : 0.0;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const std::int32_t label = labels[r];
    const float* z = logits + r * classes;
    if (label < 0 || label >= classes) {
      if (r < bad) bad = static_cast<int>(r);
      continue;
    }
    std::int64_t argmax = 0;
    for (std::int64_t j = 1; j < classes; ++j)
      if (z[j] > z[argmax]) argmax = j;
    const double zmax = z[argmax];
    double sum = 0.0;
    for (std::int64_t j = 0; j < classes; ++j) sum += exp(static_cast<double>(z[j]) - zmax);
    const double log_sum = log(sum) + zmax;
    loss += log_sum - z[label];
    correct += argmax == label ? 1 : 0;
    if (grad != nullptr) {
      float* g = grad + r * classes;
      for (std::int64_t j = 0; j < classes; ++j) {
        const double p = exp(static_cast<double>(z[j]) - log_sum);
        g[j] = static_cast<float>((p - (j == label ? 1.0 : 0.0)) * inv_n);
      }
    }
  }
  loss_part[threadIdx.x] = loss;
  correct_part[threadIdx.x] = correct;
  bad_part[threadIdx.x] = bad;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      loss_part[threadIdx.x] += loss_part[threadIdx.x + s];
      correct_part[threadIdx.x] += correct_part[threadIdx.x + s];
      bad_part[threadIdx.x] = min(bad_part[threadIdx.x], bad_part[threadIdx.x + s]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    result->loss_sum = loss_part[0];
    result->correct = correct_part[0];
    const int first_bad = bad_part[0];
    result->bad_row = first_bad < rows ? first_bad : -1;
    result->bad_label = first_bad < rows ? labels[first_bad] : 0;
    result->pad = 0;
  }
}

}  // namespace

void relu(float* y, const float* x, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  relu_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, x, n);
  check_launch(__FILE__, __LINE__);
}

void relu_backward(float* gx, const float* gy, const float* y, std::int64_t n,
                   cudaStream_t stream) {
  if (n <= 0) return;
  relu_backward_kernel<<<grid_for(n), kBlock, 0, stream>>>(gx, gy, y, n);
  check_launch(__FILE__, __LINE__);
}

void gelu(float* y, const float* x, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  gelu_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, x, n);
  check_launch(__FILE__, __LINE__);
}

void gelu_backward(float* gx, const float* gy, const float* x, std::int64_t n,
                   cudaStream_t stream) {
  if (n <= 0) return;
  gelu_backward_kernel<<<grid_for(n), kBlock, 0, stream>>>(gx, gy, x, n);
  check_launch(__FILE__, __LINE__);
}

void add_bias(float* y, const float* bias, std::int64_t rows, std::int64_t cols, bool relu,
              cudaStream_t stream) {
  if (rows * cols <= 0 || (bias == nullptr && !relu)) return;
  add_bias_kernel<<<grid_for(rows * cols), kBlock, 0, stream>>>(y, bias, rows, cols, relu);
  check_launch(__FILE__, __LINE__);
}

void add_channel_bias(float* y, const float* bias, std::int64_t batch, std::int64_t channels,
                      std::int64_t plane, bool relu, cudaStream_t stream) {
  const std::int64_t n = batch * channels * plane;
  if (n <= 0 || (bias == nullptr && !relu)) return;
  add_channel_bias_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, bias, batch, channels, plane,
                                                              relu);
  check_launch(__FILE__, __LINE__);
}

void column_sums(float* out, const float* g, std::int64_t rows, std::int64_t cols,
                 bool accumulate, cudaStream_t stream) {
  if (cols <= 0) return;
  column_sums_kernel<<<static_cast<unsigned>(cols), kBlock, 0, stream>>>(out, g, rows, cols,
                                                                         accumulate);
  check_launch(__FILE__, __LINE__);
}

void channel_sums(float* out, const float* g, std::int64_t batch, std::int64_t channels,
                  std::int64_t plane, bool accumulate, cudaStream_t stream) {
  if (channels <= 0) return;
  channel_sums_kernel<<<static_cast<unsigned>(channels), kBlock, 0, stream>>>(
      out, g, batch, channels, plane, accumulate);
  check_launch(__FILE__, __LINE__);
}

void dropout(float* y, float* mask, const float* x, std::int64_t n, double p, std::uint64_t seed,
             cudaStream_t stream) {
  if (n <= 0) return;
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  dropout_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, mask, x, n, p, scale, seed);
  check_launch(__FILE__, __LINE__);
}

void multiply(float* y, const float* x, const float* m, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  multiply_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, x, m, n);
  check_launch(__FILE__, __LINE__);
}

void add_scalar(float* x, float value, cudaStream_t stream) {
  add_scalar_kernel<<<1, 1, 0, stream>>>(x, value);
  check_launch(__FILE__, __LINE__);
}

void softmax_cross_entropy(const float* logits, const std::int32_t* labels, std::int64_t rows,
                           std::int64_t classes, float* grad, LossSums* result,
                           cudaStream_t stream) {
  softmax_cross_entropy_kernel<<<1, kBlock, 0, stream>>>(logits, labels, rows, classes, grad,
                                                         result);
  check_launch(__FILE__, __LINE__);
}

}  // namespace murmur::nn::cuda
