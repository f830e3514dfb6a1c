#include "optimizers/local_optimizer.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/name_table.h"
#include "core/names.h"
#include "optimizers/adamw.h"
#include "optimizers/lars.h"
#include "optimizers/sgd.h"

namespace murmur::optimizers {

void LocalOptimizer::reset() {
  for (auto& [name, buffer] : state()) device_.fill(buffer, 0.0f);
  steps_ = 0;
}

void LocalOptimizer::check_sizes(std::span<float> params, std::span<const float> grads) const {
  if (params.size() != size_ || grads.size() != size_)
    throw Error(fmt::format("optimizer step: params hold {} floats and grads {}, expected {}",
                            params.size(), grads.size(), size_));
}

namespace {
struct Entry {
  std::string_view name;
  std::unique_ptr<LocalOptimizer> (*make)(const OptimizerConfig&, device::Device&, std::size_t,
                                          std::span<const ArenaEntry>);
};
// sgd and adamw work elementwise and ignore the layout; lars takes it.
template <class T>
std::unique_ptr<LocalOptimizer> make(const OptimizerConfig& c, device::Device& d, std::size_t n,
                                     std::span<const ArenaEntry>) {
  return std::make_unique<T>(c, d, n);
}
std::unique_ptr<LocalOptimizer> make_lars(const OptimizerConfig& c, device::Device& d,
                                          std::size_t n, std::span<const ArenaEntry> tensors) {
  return std::make_unique<Lars>(c, d, n, tensors);
}
constexpr Entry kOptimizers[] = {{"sgd", make<Sgd>}, {"adamw", make<AdamW>}, {"lars", make_lars}};
[[maybe_unused]] const bool kRegistered =
    register_names("train.optimizer.name", local_optimizer_names());
}  // namespace

std::vector<std::string_view> local_optimizer_names() {
  return names_of(std::span<const Entry>(kOptimizers));
}

std::unique_ptr<LocalOptimizer> make_local_optimizer(const OptimizerConfig& config,
                                                     device::Device& device, std::size_t size,
                                                     std::span<const ArenaEntry> tensors) {
  return find_named(std::span<const Entry>(kOptimizers), config.name, "train.optimizer.name",
                    "optimizer").make(config, device, size, tensors);
}

}  // namespace murmur::optimizers
