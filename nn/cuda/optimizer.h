// CudaOptimizer: the local optimizer named by train.optimizer (sgd | adamw) on a device
// parameter arena, with its state buffers in device memory. The arithmetic is that of
// optimizers::Sgd and optimizers::AdamW (kernels in updates.cu); the state has the same names
// ("momentum"; "exp_avg", "exp_avg_sq") and sizes, so the runtime can mirror it into the host
// optimizer for checkpoints. The step count is the caller's (the host optimizer keeps it).
// Not thread-safe; work is queued on the given stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/config.h"
#include "nn/cuda/device.h"

namespace murmur::nn::cuda {

class CudaOptimizer {
 public:
  // For arenas of `floats` floats (padding included). Throws ConfigError for an unknown name
  // or nesterov without momentum, CudaError for a CUDA failure.
  CudaOptimizer(const OptimizerConfig& config, std::size_t floats);

  // One update of params (floats() of them) from grads with learning rate lr; `steps_before`
  // counts the updates taken before this one.
  void step(float* params, const float* grads, float lr, std::int64_t steps_before,
            cudaStream_t stream);

  // The state buffers by name, each floats() device floats; empty for SGD without momentum.
  std::vector<std::pair<std::string, float*>> state() const;
  std::size_t floats() const { return floats_; }

 private:
  OptimizerConfig config_;
  std::size_t floats_;
  DeviceBuffer first_, second_;  // momentum, or exp_avg and exp_avg_sq
};

}  // namespace murmur::nn::cuda
