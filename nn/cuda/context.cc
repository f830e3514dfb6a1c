#include "nn/cuda/context.h"

#include "nn/cuda/check.h"

namespace murmur::nn::cuda {
namespace {

int make_current(int device) {
  MURMUR_CUDA_CHECK(cudaSetDevice(device));
  return device;
}

}  // namespace

Context::Context(int device) : device_(make_current(device)) {
  MURMUR_CUBLAS_CHECK(cublasCreate(&blas_));
  try {
    MURMUR_CUBLAS_CHECK(cublasSetStream(blas_, stream_.get()));
    // Plain FP32 GEMMs (no TF32), so results match the CPU path to float rounding; the
    // pointer mode stays host (alpha and beta are host scalars).
    MURMUR_CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH));
    MURMUR_CUDNN_CHECK(cudnnCreate(&dnn_));
    MURMUR_CUDNN_CHECK(cudnnSetStream(dnn_, stream_.get()));
  } catch (...) {
    if (dnn_ != nullptr) cudnnDestroy(dnn_);
    cublasDestroy(blas_);
    throw;
  }
}

Context::~Context() {
  if (dnn_ != nullptr) cudnnDestroy(dnn_);
  if (blas_ != nullptr) cublasDestroy(blas_);
}

void* Context::scratch(std::size_t bytes) {
  if (bytes > scratch_.size()) {
    scratch_ = DeviceBuffer();  // free first: the new one may need the room
    scratch_ = DeviceBuffer(bytes);
  }
  return scratch_.data();
}

}  // namespace murmur::nn::cuda
