// SGD with optional momentum, Nesterov momentum and L2 weight decay, exactly as
// torch.optim.SGD with dampening 0: g += wd * p; b = mu * b + g (b = g on the first step);
// g = nesterov ? g + mu * b : b; p -= lr * g. Owns one "momentum" buffer when mu > 0.
#pragma once

#include "optimizers/local_optimizer.h"

namespace murmur::optimizers {

class Sgd final : public LocalOptimizer {
 public:
  // Uses config.momentum, nesterov and weight_decay. Throws ConfigError for nesterov without
  // momentum (torch refuses it too).
  Sgd(const OptimizerConfig& config, device::Device& device, std::size_t size);

  void step(std::span<float> params, std::span<const float> grads, float lr) override;
  std::vector<std::pair<std::string, std::span<float>>> state() override;

 private:
  float momentum_;
  float weight_decay_;
  bool nesterov_;
  device::Array buffer_;  // empty when momentum_ == 0
};

}  // namespace murmur::optimizers
