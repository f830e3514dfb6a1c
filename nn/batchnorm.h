// BatchNorm2d: PyTorch's nn.BatchNorm2d (affine, track_running_stats) on [n, c, h, w] batches.
// Parameters weight [c] (init 1) and bias [c] (init 0); buffers running_mean [c] (init 0),
// running_var [c] (init 1) and num_batches_tracked, kept as a float [] (PyTorch's is int64;
// load_state_dict converts). Training normalizes with batch statistics and moves the running
// ones by `momentum`; evaluation uses the running ones. Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "nn/layer.h"

namespace murmur::nn {

class BatchNorm2d : public Layer {
 public:
  // Throws ConfigError unless channels > 0, eps > 0 and 0 <= momentum <= 1.
  explicit BatchNorm2d(std::int64_t channels, float eps = 1e-5f, float momentum = 0.1f);

  std::string kind() const override { return "BatchNorm2d"; }
  std::string describe() const override;
  void declare(ParamDeclarer& decl) override;
  void bind(ParamViews& views) override;
  // weight 1, bias 0, running_mean 0, running_var 1, num_batches_tracked 0 (no random draws).
  void init(Rng& rng) override;
  // Throws ConfigError unless input is [channels, h, w].
  Shape output_shape(const Shape& input) const override;
  // The mean and 1/sqrt(var + eps) that forward normalized with, per channel.
  std::size_t workspace_floats(const Shape& input, std::int64_t n) const override;
  // Throws Error in training mode if n * h * w < 2 (no variance to take).
  void forward(const Tensor& in, Tensor& out, std::span<float> workspace,
               const StepContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                std::span<float> workspace, const StepContext& ctx) override;

  std::int64_t channels() const { return channels_; }
  float eps() const { return eps_; }
  float momentum() const { return momentum_; }

 private:
  std::int64_t channels_;
  float eps_, momentum_;
  std::size_t weight_index_ = 0, bias_index_ = 0;
  std::size_t mean_index_ = 0, var_index_ = 0, batches_index_ = 0;
  std::span<float> weight_, bias_, weight_grad_, bias_grad_;
  std::span<float> running_mean_, running_var_, num_batches_tracked_;
};

}  // namespace murmur::nn
