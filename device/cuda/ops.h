// The op table's CUDA kernels (device/device.h), behind CudaDevice (device/cuda/cuda_device.h):
// grid-stride loops over device arrays, each the same float operations in the same order as
// its CPU twin in device/cpu.cc, so results agree to rounding. Queued on `stream`; compiled in
// ops.cu by nvcc.
#pragma once

#include <cstdint>
#include <span>

#include <cuda_runtime_api.h>

#include "device/device.h"

namespace murmur::device::cuda {

// The updates of device/device.h (SgdStep, AdamWStep); buffer may be null without momentum.
void sgd_step(float* params, const float* grads, float* buffer, std::int64_t n,
              const SgdStep& s, cudaStream_t stream);
void adamw_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                std::int64_t n, const AdamWStep& a, cudaStream_t stream);

// x <- v.
void fill(float* x, float v, std::int64_t n, cudaStream_t stream);
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

}  // namespace murmur::device::cuda
