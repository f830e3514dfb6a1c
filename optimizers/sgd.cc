#include "optimizers/sgd.h"

#include "core/error.h"

namespace murmur::optimizers {

Sgd::Sgd(const OptimizerConfig& config, device::Device& device, std::size_t size)
    : LocalOptimizer(device, size),
      momentum_(static_cast<float>(config.momentum)),
      weight_decay_(static_cast<float>(config.weight_decay)),
      nesterov_(config.nesterov) {
  if (nesterov_ && momentum_ <= 0.0f)
    throw ConfigError("train.optimizer.nesterov: needs momentum > 0");
  if (momentum_ > 0.0f) buffer_ = device.zeros(size);
}

void Sgd::step(std::span<float> params, std::span<const float> grads, float lr) {
  check_sizes(params, grads);
  device::SgdStep s;
  s.lr = lr;
  s.momentum = momentum_;
  s.weight_decay = weight_decay_;
  s.nesterov = nesterov_;
  s.first_step = steps_ == 0;
  device_.sgd_step(params, grads, buffer_.span(), s);
  ++steps_;
}

std::vector<std::pair<std::string, std::span<float>>> Sgd::state() {
  if (buffer_.empty()) return {};
  return {{"momentum", buffer_.span()}};
}

}  // namespace murmur::optimizers
