// Checked calls into cuBLAS and cuDNN (the CUDA runtime's are device/cuda/check.h, included
// here): every call's status is tested; a failure throws murmur::CudaError naming the
// expression, the library's status string and the file:line of the call. Only nn/cuda and
// guarded hooks include this (the CPU build never does).
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include "device/cuda/check.h"

namespace murmur::nn::cuda {

[[noreturn]] void throw_cublas(cublasStatus_t status, const char* expr, const char* file,
                               int line);
[[noreturn]] void throw_cudnn(cudnnStatus_t status, const char* expr, const char* file, int line);

// The name of a cuBLAS status (cublasGetStatusString exists from CUDA 11.4 on).
const char* cublas_status_name(cublasStatus_t status);

}  // namespace murmur::nn::cuda

#define MURMUR_CUBLAS_CHECK(expr)                                                         \
  do {                                                                                    \
    const cublasStatus_t murmur_status_ = (expr);                                         \
    if (murmur_status_ != CUBLAS_STATUS_SUCCESS)                                          \
      ::murmur::nn::cuda::throw_cublas(murmur_status_, #expr, __FILE__, __LINE__);        \
  } while (0)

#define MURMUR_CUDNN_CHECK(expr)                                                          \
  do {                                                                                    \
    const cudnnStatus_t murmur_status_ = (expr);                                          \
    if (murmur_status_ != CUDNN_STATUS_SUCCESS)                                           \
      ::murmur::nn::cuda::throw_cudnn(murmur_status_, #expr, __FILE__, __LINE__);         \
  } while (0)
