// Flat-array kernels on device arenas: the local optimizers' updates (SGD with momentum,
// Nesterov and weight decay; AdamW) and the averaging arithmetic (mix, axpy, scaled
// differences, scale, squared distance). Each mirrors its CPU twin in optimizers/ operation for
// operation, so float results agree to rounding. Queued on `stream`; compiled in updates.cu.
#pragma once

#include <cstdint>
#include <span>

#include <cuda_runtime_api.h>

namespace murmur::nn::cuda {

struct SgdParams {
  float lr = 0, momentum = 0, weight_decay = 0;
  bool nesterov = false;
  bool first_step = false;  // the momentum buffer starts as the first gradient (torch)
};
// torch.optim.SGD: d = g + wd p; b = first ? d : mu b + d; p -= lr (nesterov ? d + mu b : b).
// buffer may be null when momentum is 0.
void sgd_step(float* params, const float* grads, float* buffer, std::int64_t n,
              const SgdParams& s, cudaStream_t stream);

struct AdamWParams {
  float decay = 1;           // 1 - lr * weight_decay
  float beta1 = 0.9f, one_minus_beta1 = 0.1f;
  float beta2 = 0.999f, one_minus_beta2 = 0.001f;
  float step_size = 0;       // lr / (1 - beta1^t)
  float inv_bias2_sqrt = 1;  // 1 / sqrt(1 - beta2^t)
  float eps = 1e-8f;
};
// torch.optim.AdamW (Loshchilov & Hutter 2019, Algorithm 2): p *= decay; m, v moments;
// p -= step_size m / (sqrt(v) inv_bias2_sqrt + eps).
void adamw_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                std::int64_t n, const AdamWParams& a, cudaStream_t stream);

// x <- self * x + sum_k weights[k] * inputs[k] (inputs are device pointers of n floats).
void mix(float* x, std::int64_t n, float self, std::span<const float* const> inputs,
         std::span<const float> weights, cudaStream_t stream);
// y <- y + a * x.
void axpy(float* y, float a, const float* x, std::int64_t n, cudaStream_t stream);
// y <- a * x + b * y.
void axpby(float* y, float a, const float* x, float b, std::int64_t n, cudaStream_t stream);
// y <- y + a * (u - v).
void add_scaled_diff(float* y, float a, const float* u, const float* v, std::int64_t n,
                     cudaStream_t stream);
// x <- a * x.
void scale(float* x, float a, std::int64_t n, cudaStream_t stream);
// sum_i (x_i - y_i)^2 in double. Synchronizes `stream` (the host needs the value).
double squared_distance(const float* x, const float* y, std::int64_t n, cudaStream_t stream);

}  // namespace murmur::nn::cuda
