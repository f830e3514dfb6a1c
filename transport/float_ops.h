// FloatOps: the memory a collective's float arrays live in and the arithmetic it does on them.
// The ring allreduce (collectives.h) and the live allreduce (membership/) reduce into the
// caller's data with these, so that the same collective runs on host memory (host_float_ops(),
// plain loops) or on a GPU's (the device room supplies its own, optimizers/device_float_ops.h)
// without transport knowing which. Implementations are used by one thread at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "transport/transport.h"

namespace murmur::transport {

class FloatOps {
 public:
  // Zeroed floats in the ops' memory, registered with a transport; owns both. The region is
  // declared last, so it is unregistered before the memory goes; to replace a Scratch, reset
  // its region first.
  struct Scratch {
    std::shared_ptr<void> owner;
    std::span<float> floats;
    std::unique_ptr<Region> region;
  };

  virtual ~FloatOps() = default;
  virtual Scratch scratch(Transport& transport, std::size_t floats) = 0;
  // acc <- acc + in.
  virtual void add(std::span<float> acc, std::span<const float> in) = 0;
  // x <- a x.
  virtual void scale(std::span<float> x, float a) = 0;
  // out <- in.
  virtual void copy(std::span<float> out, std::span<const float> in) = 0;
};

// Host memory and loops.
FloatOps& host_float_ops();

}  // namespace murmur::transport
