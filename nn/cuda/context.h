// Context: what every device layer call needs, for one device: the stream that orders all of a
// model's work, a cuBLAS and a cuDNN handle bound to that stream, and one scratch buffer (cuDNN
// workspaces) grown on demand. Created on the current device; owned by a CudaModel (or a test);
// not thread-safe.
#pragma once

#include <cstddef>
#include <memory>

#include <cublas_v2.h>
#include <cudnn.h>

#include "nn/cuda/memory.h"

namespace murmur::nn::cuda {

class Context {
 public:
  // Makes `device` current for this thread and builds the stream and handles on it.
  // Throws CudaError.
  explicit Context(int device = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_.get(); }
  cublasHandle_t blas() const { return blas_; }
  cudnnHandle_t dnn() const { return dnn_; }
  void synchronize() const { stream_.synchronize(); }

  // At least `bytes` of device scratch, valid until the next scratch() call that grows it.
  // Growing frees the old buffer (cudaFree waits for the device, so no kernel still uses it).
  void* scratch(std::size_t bytes);

 private:
  int device_;
  Stream stream_;
  cublasHandle_t blas_ = nullptr;
  cudnnHandle_t dnn_ = nullptr;
  DeviceBuffer scratch_;
};

}  // namespace murmur::nn::cuda
