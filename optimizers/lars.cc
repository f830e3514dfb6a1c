#include "optimizers/lars.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::optimizers {

Lars::Lars(const OptimizerConfig& config, device::Device& device, std::size_t size,
           std::span<const ArenaEntry> tensors)
    : LocalOptimizer(device, size),
      momentum_(static_cast<float>(config.momentum)),
      weight_decay_(static_cast<float>(config.weight_decay)),
      nesterov_(config.nesterov),
      eta_(config.trust_coefficient) {
  if (nesterov_ && momentum_ <= 0.0f)
    throw ConfigError("train.optimizer.nesterov: needs momentum > 0");
  if (tensors.empty()) segments_.push_back({0, size, true});
  std::size_t largest = tensors.empty() ? size : 0;
  for (const ArenaEntry& t : tensors) {
    if (t.offset + t.numel > size) {
      throw Error(fmt::format("lars: tensor {} ends at float {}, past the arena's {}", t.name,
                              t.offset + t.numel, size));
    }
    segments_.push_back({t.offset, t.numel, t.shape.size() > 1});
    largest = std::max(largest, t.numel);
  }
  if (momentum_ > 0.0f) buffer_ = device.zeros(size);
  scaled_ = device.zeros(size);
  zeros_ = device.zeros(largest);
}

void Lars::step(std::span<float> params, std::span<const float> grads, float lr) {
  check_sizes(params, grads);
  const std::span<float> g = scaled_.span();
  device_.copy(g, grads);  // the padding between tensors is zero in both
  last_trust_.clear();
  for (const Segment& s : segments_) {
    const auto w = params.subspan(s.offset, s.numel);
    const auto gs = g.subspan(s.offset, s.numel);
    double trust = 1.0;
    if (s.adapted) {
      const auto zero = std::span<const float>(zeros_.span()).first(s.numel);
      const double w_norm = std::sqrt(device_.squared_distance(w, zero));
      const double g_norm = std::sqrt(device_.squared_distance(gs, zero));
      if (w_norm > 0 && g_norm > 0) trust = eta_ * w_norm / (g_norm + weight_decay_ * w_norm);
      last_trust_.push_back(trust);
    }
    if (weight_decay_ != 0.0f) device_.axpy(gs, weight_decay_, w);
    if (trust != 1.0) device_.scale(gs, static_cast<float>(trust));
  }
  device::SgdStep s;
  s.lr = lr;
  s.momentum = momentum_;
  s.weight_decay = 0.0f;  // already in g, inside the trust ratio's rescaling
  s.nesterov = nesterov_;
  s.first_step = steps_ == 0;
  device_.sgd_step(params, g, buffer_.span(), s);
  ++steps_;
}

std::vector<std::pair<std::string, std::span<float>>> Lars::state() {
  if (buffer_.empty()) return {};
  return {{"momentum", buffer_.span()}};
}

}  // namespace murmur::optimizers
