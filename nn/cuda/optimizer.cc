#include "nn/cuda/optimizer.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "nn/cuda/updates.h"

namespace murmur::nn::cuda {

CudaOptimizer::CudaOptimizer(const OptimizerConfig& config, std::size_t floats)
    : config_(config), floats_(floats) {
  if (config.name == "sgd") {
    if (config.nesterov && config.momentum <= 0)
      throw ConfigError("train.optimizer.nesterov: needs momentum > 0");
    if (config.momentum > 0) first_ = DeviceBuffer(floats * sizeof(float));
  } else if (config.name == "adamw") {
    first_ = DeviceBuffer(floats * sizeof(float));
    second_ = DeviceBuffer(floats * sizeof(float));
  } else {
    throw ConfigError(
        fmt::format("train.optimizer.name: unknown optimizer '{}' (sgd | adamw)", config.name));
  }
}

void CudaOptimizer::step(float* params, const float* grads, float lr, std::int64_t steps_before,
                         cudaStream_t stream) {
  const auto n = static_cast<std::int64_t>(floats_);
  if (config_.name == "sgd") {
    SgdParams s;
    s.lr = lr;
    s.momentum = static_cast<float>(config_.momentum);
    s.weight_decay = static_cast<float>(config_.weight_decay);
    s.nesterov = config_.nesterov;
    s.first_step = steps_before == 0;
    sgd_step(params, grads, first_.floats(), n, s, stream);
    return;
  }
  // Scalars in double, as optimizers/adamw.cc (and torch, in Python floats).
  const double t = static_cast<double>(steps_before + 1);
  const double bias1 = 1.0 - std::pow(config_.beta1, t);
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(config_.beta2, t));
  AdamWParams a;
  a.decay = static_cast<float>(1.0 - lr * config_.weight_decay);
  a.beta1 = static_cast<float>(config_.beta1);
  a.one_minus_beta1 = static_cast<float>(1.0 - config_.beta1);
  a.beta2 = static_cast<float>(config_.beta2);
  a.one_minus_beta2 = static_cast<float>(1.0 - config_.beta2);
  a.step_size = static_cast<float>(lr / bias1);
  a.inv_bias2_sqrt = static_cast<float>(1.0 / bias2_sqrt);
  a.eps = static_cast<float>(config_.eps);
  adamw_step(params, grads, first_.floats(), second_.floats(), n, a, stream);
}

std::vector<std::pair<std::string, float*>> CudaOptimizer::state() const {
  if (config_.name == "adamw") return {{"exp_avg", first_.floats()}, {"exp_avg_sq", second_.floats()}};
  if (first_.size() > 0) return {{"momentum", first_.floats()}};
  return {};
}

}  // namespace murmur::nn::cuda
