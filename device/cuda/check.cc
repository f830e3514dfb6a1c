#include "device/cuda/check.h"

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::device::cuda {

void throw_cuda(cudaError_t status, const char* expr, const char* file, int line) {
  throw CudaError(fmt::format("{}:{}: {} failed: {} ({})", file, line, expr,
                              cudaGetErrorString(status), cudaGetErrorName(status)));
}

}  // namespace murmur::device::cuda
