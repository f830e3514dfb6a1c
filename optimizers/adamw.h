// AdamW, exactly as torch.optim.AdamW (amsgrad off; Loshchilov & Hutter 2019, Algorithm 2):
// p *= 1 - lr * wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
// Owns two buffers, "exp_avg" (m) and "exp_avg_sq" (v), named as in torch's state_dict.
#pragma once

#include "optimizers/local_optimizer.h"

namespace murmur::optimizers {

class AdamW final : public LocalOptimizer {
 public:
  // Uses config.beta1, beta2, eps and weight_decay.
  AdamW(const OptimizerConfig& config, device::Device& device, std::size_t size);

  void step(std::span<float> params, std::span<const float> grads, float lr) override;
  std::vector<std::pair<std::string, std::span<float>>> state() override;

 private:
  double beta1_;
  double beta2_;
  double eps_;
  double weight_decay_;
  device::Array exp_avg_;
  device::Array exp_avg_sq_;
};

}  // namespace murmur::optimizers
