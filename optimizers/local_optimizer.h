// A local optimizer updates one peer's flat parameter arena from its gradient arena, in place.
// It owns its state buffers (momentum, Adam moments), each the size of the arena, and exposes
// them by name for checkpoints. Not thread-safe: the training thread alone calls step().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"

namespace murmur::optimizers {

class LocalOptimizer {
 public:
  explicit LocalOptimizer(std::size_t size) : size_(size) {}
  virtual ~LocalOptimizer() = default;
  LocalOptimizer(const LocalOptimizer&) = delete;
  LocalOptimizer& operator=(const LocalOptimizer&) = delete;

  // One update with learning rate `lr` (the schedule's value for this step). Both spans must
  // hold size() floats; throws murmur::Error otherwise.
  virtual void step(std::span<float> params, std::span<const float> grads, float lr) = 0;

  // Named state buffers, each of size() floats, e.g. {"momentum", ...}; empty for plain SGD.
  // The spans stay valid for the optimizer's lifetime; a checkpoint reads and restores them in
  // place (with set_steps()).
  virtual std::vector<std::pair<std::string, std::span<float>>> state() = 0;

  // Steps taken so far (Adam's bias correction and SGD's first-step momentum depend on it).
  std::int64_t steps() const { return steps_; }
  // For resume: the step count saved next to state().
  void set_steps(std::int64_t steps) { steps_ = steps; }
  // Zeroes the state and the step count, as a freshly built optimizer.
  virtual void reset();

  std::size_t size() const { return size_; }

 protected:
  // Throws murmur::Error unless params and grads both hold size() floats.
  void check_sizes(std::span<float> params, std::span<const float> grads) const;

  std::int64_t steps_ = 0;

 private:
  std::size_t size_;
};

// The optimizer named by config.name ("sgd" | "adamw") for an arena of `size` floats.
// Throws ConfigError for another name.
std::unique_ptr<LocalOptimizer> make_local_optimizer(const OptimizerConfig& config,
                                                     std::size_t size);

}  // namespace murmur::optimizers
