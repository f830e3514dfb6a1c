// A local optimizer updates one peer's flat parameter arena from its gradient arena, in place,
// on the peer's Device (host memory or a GPU) through its op table: one SGD and one AdamW for
// both. It owns its state buffers (momentum, Adam moments), arrays of the device the size of
// the arena, and exposes them by name for checkpoints. Not thread-safe: the training thread
// alone calls step().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "core/config.h"
#include "device/device.h"

namespace murmur::optimizers {

class LocalOptimizer {
 public:
  LocalOptimizer(device::Device& device, std::size_t size) : device_(device), size_(size) {}
  virtual ~LocalOptimizer() = default;
  LocalOptimizer(const LocalOptimizer&) = delete;
  LocalOptimizer& operator=(const LocalOptimizer&) = delete;

  // One update with learning rate `lr` (the schedule's value for this step). Both spans must
  // hold size() floats; throws murmur::Error otherwise.
  virtual void step(std::span<float> params, std::span<const float> grads, float lr) = 0;

  // Named state buffers, each of size() floats of the device, e.g. {"momentum", ...}; empty for
  // plain SGD. The spans stay valid for the optimizer's lifetime; a checkpoint reads and
  // restores them in place (with set_steps()).
  virtual std::vector<std::pair<std::string, std::span<float>>> state() = 0;

  // Steps taken so far (Adam's bias correction and SGD's first-step momentum depend on it).
  std::int64_t steps() const { return steps_; }
  // For resume: the step count saved next to state().
  void set_steps(std::int64_t steps) { steps_ = steps; }
  // Zeroes the state and the step count, as a freshly built optimizer.
  virtual void reset();

  std::size_t size() const { return size_; }
  device::Device& device() const { return device_; }

 protected:
  // Throws murmur::Error unless params and grads both hold size() floats.
  void check_sizes(std::span<float> params, std::span<const float> grads) const;

  device::Device& device_;
  std::int64_t steps_ = 0;

 private:
  std::size_t size_;
};

// The optimizer named by config.name for an arena of `size` floats on `device`, laid out as
// `tensors` (the model's parameter arena entries; lars rescales per tensor, and takes an empty
// layout as one tensor). Throws ConfigError for a name that is not one of
// local_optimizer_names().
std::unique_ptr<LocalOptimizer> make_local_optimizer(const OptimizerConfig& config,
                                                     device::Device& device, std::size_t size,
                                                     std::span<const ArenaEntry> tensors = {});
// The names make_local_optimizer knows ("sgd", "adamw", "lars").
std::vector<std::string_view> local_optimizer_names();

}  // namespace murmur::optimizers
