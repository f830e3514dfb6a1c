// CudaModel: a Model's network on one GPU. Built from a host nn::Model (made by Model::create
// from the same ModelConfig), it mirrors that model's layers one to one (the same fusions,
// Flatten as a view) and keeps parameters, gradients and buffers in DeviceArenas with the host
// arenas' layouts, so names, shapes and offsets, and therefore checkpoints, are the same. The
// host model stays the source of the network's description and must outlive this object.
// All work runs on the Context's stream; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "nn/cuda/context.h"
#include "nn/cuda/device_arena.h"
#include "nn/cuda/kernels.h"
#include "nn/cuda/layer.h"
#include "nn/model.h"

namespace murmur::nn::cuda {

class CudaModel {
 public:
  // Device arenas filled from host's arenas (one copy each). Throws Error for a layer with no
  // CUDA version, CudaError for a CUDA failure.
  CudaModel(Model& host, Context& cx);

  // As Model::train_batch, with x and labels in host memory: grads() then holds the gradient of
  // the mean cross-entropy (overwritten). Waits for the device once, to return the mean loss.
  // Throws DataError for a label out of range.
  float train_batch(const float* x, const std::int32_t* labels, int n, Rng& rng);
  // As Model::evaluate (evaluation mode, no gradients).
  EvalResult evaluate(const float* x, const std::int32_t* labels, int n);

  DeviceArena& params() { return params_; }
  DeviceArena& grads() { return grads_; }
  DeviceArena& buffers() { return buffers_; }
  Context& context() { return cx_; }
  Model& host() { return host_; }

  // Whole-arena copies between the host model's params+buffers and these; they wait for the
  // stream, so the host arenas are ready (or free to change) when they return.
  void copy_to_host();
  void copy_from_host();

 private:
  struct Slot {
    std::unique_ptr<DeviceLayer> layer;  // null for a view or a fused (skipped) layer
    bool skipped = false;
    bool has_params = false;
  };
  void reserve(std::int64_t n);
  // Copies n samples to the device input and runs forward; returns the logits.
  const Tensor& forward(const float* x, const std::int32_t* labels, std::int64_t n,
                        const StepContext& ctx);
  void backward(const StepContext& ctx);
  LossSums finish_loss(std::int64_t n);

  Model& host_;
  Context& cx_;
  DeviceArena params_, grads_, buffers_;
  std::vector<Slot> slots_;
  std::vector<Shape> shapes_;      // shapes_[k]: activation k per sample (0 = the input)
  std::vector<std::size_t> root_;  // the activation whose memory activation k shares
  std::vector<bool> needs_grad_;
  std::int64_t capacity_ = 0;
  std::int64_t batch_ = 0;
  std::vector<DeviceBuffer> act_memory_, grad_memory_, workspace_;
  std::vector<Tensor> act_, grad_;
  DeviceBuffer labels_;
  DeviceBuffer loss_;         // one LossSums
  PinnedBuffer staging_;      // x and labels on their way in, LossSums on its way out
};

}  // namespace murmur::nn::cuda
