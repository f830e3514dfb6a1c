// The op table's kernels (device/cuda/ops.h): grid-stride loops over the arrays, the same float
// operations in the same order as device/cpu.cc.
#include "device/cuda/ops.h"

#include <vector>

#include "device/cuda/launch.h"

namespace murmur::device::cuda {
namespace {

__global__ void sgd_kernel(float* p, const float* g, float* b, std::int64_t n, SgdStep s) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    const float d = g[i] + s.weight_decay * p[i];
    if (s.momentum == 0.0f) {
      p[i] -= s.lr * d;
      continue;
    }
    const float buf = s.first_step ? d : s.momentum * b[i] + d;
    b[i] = buf;
    p[i] -= s.lr * (s.nesterov ? d + s.momentum * buf : buf);
  }
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, std::int64_t n,
                             AdamWStep a) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    float pi = p[i] * a.decay;
    const float gi = g[i];
    const float mi = a.beta1 * m[i] + a.one_minus_beta1 * gi;
    const float vi = a.beta2 * v[i] + a.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) * a.inv_bias2_sqrt + a.eps;
    p[i] = pi - a.step_size * mi / denom;
  }
}

// Up to kMixInputs inputs per launch, passed by value (no device pointer array to upload).
constexpr int kMixInputs = 8;
struct MixInputs {
  const float* in[kMixInputs];
  float w[kMixInputs];
  int count;
};

__global__ void mix_kernel(float* x, std::int64_t n, float self, MixInputs inputs) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    float acc = self * x[i];
    for (int k = 0; k < inputs.count; ++k) acc += inputs.w[k] * inputs.in[k][i];
    x[i] = acc;
  }
}

__global__ void fill_kernel(float* x, float v, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) x[i] = v;
}

__global__ void axpby_kernel(float* y, float a, const float* x, float b, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) y[i] = a * x[i] + b * y[i];
}

__global__ void axpy_kernel(float* y, float a, const float* x, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) y[i] += a * x[i];
}

__global__ void add_scaled_diff_kernel(float* y, float a, const float* u, const float* v,
                                       std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) y[i] += a * (u[i] - v[i]);
}

__global__ void scale_kernel(float* x, float a, std::int64_t n) {
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) x[i] *= a;
}

// One partial sum per block; the host adds the (at most 4096) partials in a fixed order, so the
// result does not depend on scheduling.
__global__ void squared_distance_kernel(const float* x, const float* y, std::int64_t n,
                                        double* partials) {
  __shared__ double shared[kBlock];
  double s = 0.0;
  for (std::int64_t i = grid_index(); i < n; i += grid_stride()) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(y[i]);
    s += d * d;
  }
  const double total = block_sum(s, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

}  // namespace

void sgd_step(float* params, const float* grads, float* buffer, std::int64_t n,
              const SgdStep& s, cudaStream_t stream) {
  if (n <= 0) return;
  if (s.momentum != 0.0f && buffer == nullptr)
    throw Error("cuda::sgd_step: momentum without a buffer");
  sgd_kernel<<<grid_for(n), kBlock, 0, stream>>>(params, grads, buffer, n, s);
  check_launch(__FILE__, __LINE__);
}

void adamw_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                std::int64_t n, const AdamWStep& a, cudaStream_t stream) {
  if (n <= 0) return;
  adamw_kernel<<<grid_for(n), kBlock, 0, stream>>>(params, grads, exp_avg, exp_avg_sq, n, a);
  check_launch(__FILE__, __LINE__);
}

void mix(float* x, std::int64_t n, float self, std::span<const float* const> inputs,
         std::span<const float> weights, cudaStream_t stream) {
  if (inputs.size() != weights.size()) throw Error("cuda::mix: inputs and weights differ in count");
  if (n <= 0) return;
  std::size_t k = 0;
  do {  // at least one launch: with no inputs it is the scale by `self`
    MixInputs batch{};
    batch.count = 0;
    for (; k < inputs.size() && batch.count < kMixInputs; ++k, ++batch.count) {
      batch.in[batch.count] = inputs[k];
      batch.w[batch.count] = weights[k];
    }
    mix_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, n, self, batch);
    check_launch(__FILE__, __LINE__);
    self = 1.0f;  // later batches add to what the first one wrote
  } while (k < inputs.size());
}

void fill(float* x, float v, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  fill_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, v, n);
  check_launch(__FILE__, __LINE__);
}

void axpy(float* y, float a, const float* x, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  axpy_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, a, x, n);
  check_launch(__FILE__, __LINE__);
}

void axpby(float* y, float a, const float* x, float b, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  axpby_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, a, x, b, n);
  check_launch(__FILE__, __LINE__);
}

void add_scaled_diff(float* y, float a, const float* u, const float* v, std::int64_t n,
                     cudaStream_t stream) {
  if (n <= 0) return;
  add_scaled_diff_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, a, u, v, n);
  check_launch(__FILE__, __LINE__);
}

void scale(float* x, float a, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  scale_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, a, n);
  check_launch(__FILE__, __LINE__);
}

double squared_distance(const float* x, const float* y, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return 0.0;
  const unsigned blocks = grid_for(n);
  double* partials = nullptr;
  cudaError_t status = cudaMallocAsync(reinterpret_cast<void**>(&partials),
                                       blocks * sizeof(double), stream);
  if (status != cudaSuccess)
    throw CudaError(std::string("cuda::squared_distance: cudaMallocAsync: ") +
                    cudaGetErrorString(status));
  squared_distance_kernel<<<blocks, kBlock, 0, stream>>>(x, y, n, partials);
  status = cudaGetLastError();
  std::vector<double> host(blocks);
  if (status == cudaSuccess)
    status = cudaMemcpyAsync(host.data(), partials, blocks * sizeof(double),
                             cudaMemcpyDeviceToHost, stream);
  cudaFreeAsync(partials, stream);
  if (status == cudaSuccess) status = cudaStreamSynchronize(stream);
  if (status != cudaSuccess)
    throw CudaError(std::string("cuda::squared_distance: ") + cudaGetErrorString(status));
  double total = 0.0;
  for (double v : host) total += v;
  return total;
}

}  // namespace murmur::device::cuda
