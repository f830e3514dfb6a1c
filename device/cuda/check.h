// Checked calls into the CUDA runtime: a failure throws murmur::CudaError naming the expression,
// the runtime's status string and the file:line of the call. Included only by CUDA code (built
// with MURMUR_WITH_CUDA); nn/cuda/check.h adds the cuBLAS and cuDNN twins.
#pragma once

#include <cuda_runtime_api.h>

namespace murmur::device::cuda {

[[noreturn]] void throw_cuda(cudaError_t status, const char* expr, const char* file, int line);

}  // namespace murmur::device::cuda

#define MURMUR_CUDA_CHECK(expr)                                                           \
  do {                                                                                    \
    const cudaError_t murmur_status_ = (expr);                                            \
    if (murmur_status_ != cudaSuccess)                                                    \
      ::murmur::device::cuda::throw_cuda(murmur_status_, #expr, __FILE__, __LINE__);      \
  } while (0)

// After a kernel launch: a bad launch configuration shows up here, not at the next sync.
#define MURMUR_CUDA_CHECK_LAUNCH() MURMUR_CUDA_CHECK(cudaGetLastError())
