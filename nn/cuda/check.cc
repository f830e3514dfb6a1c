#include "nn/cuda/check.h"

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::nn::cuda {

const char* cublas_status_name(cublasStatus_t status) { return cublasGetStatusString(status); }

void throw_cublas(cublasStatus_t status, const char* expr, const char* file, int line) {
  throw CudaError(fmt::format("{}:{}: {} failed: {} ({})", file, line, expr,
                              cublas_status_name(status), static_cast<int>(status)));
}

void throw_cudnn(cudnnStatus_t status, const char* expr, const char* file, int line) {
  throw CudaError(fmt::format("{}:{}: {} failed: {} ({})", file, line, expr,
                              cudnnGetErrorString(status), static_cast<int>(status)));
}

}  // namespace murmur::nn::cuda
