#include "optimizers/local_optimizer.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "optimizers/adamw.h"
#include "optimizers/sgd.h"

namespace murmur::optimizers {

void LocalOptimizer::reset() {
  for (auto& [name, buffer] : state()) std::fill(buffer.begin(), buffer.end(), 0.0f);
  steps_ = 0;
}

void LocalOptimizer::check_sizes(std::span<float> params, std::span<const float> grads) const {
  if (params.size() != size_ || grads.size() != size_)
    throw Error(fmt::format("optimizer step: params hold {} floats and grads {}, expected {}",
                            params.size(), grads.size(), size_));
}

std::unique_ptr<LocalOptimizer> make_local_optimizer(const OptimizerConfig& config,
                                                     std::size_t size) {
  if (config.name == "sgd") return std::make_unique<Sgd>(config, size);
  if (config.name == "adamw") return std::make_unique<AdamW>(config, size);
  throw ConfigError(
      fmt::format("train.optimizer.name: unknown optimizer '{}' (sgd | adamw)", config.name));
}

}  // namespace murmur::optimizers
