// Launch helpers shared by the .cu files: the block size, a grid for n elements, the
// grid-stride index, a block-wide tree sum, and the post-launch check. Included by .cu files
// only (it has device code).
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "core/error.h"

namespace murmur::device::cuda {

constexpr int kBlock = 256;  // threads per block; a power of two (block_sum relies on it)

// Blocks for n elements at kBlock threads each, capped: the kernels loop with a grid stride.
inline unsigned grid_for(std::int64_t n) {
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < 4096 ? (blocks < 1 ? 1 : blocks) : 4096);
}

__device__ inline std::int64_t grid_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// Sum of v over the block (blockDim.x == kBlock); the result is valid in every thread.
template <class T>
__device__ T block_sum(T v, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();  // shared may be reused by the caller right after
  return total;
}

// Throws CudaError naming the launch site if the launch just queued was refused.
inline void check_launch(const char* file, int line) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw CudaError(std::string(file) + ":" + std::to_string(line) +
                    ": kernel launch failed: " + cudaGetErrorString(status));
  }
}

}  // namespace murmur::device::cuda
