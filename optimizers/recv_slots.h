// RecvSlots: `count` receive buffers of `floats` floats each, in one allocation of the peer's
// device registered with the transport once (each slot 256-byte aligned). Grows, re-registering,
// only when a round needs more slots than any before (time-varying in-degrees), so steady-state
// rounds allocate nothing. Not thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "device/device.h"
#include "transport/transport.h"

namespace murmur::optimizers {

class RecvSlots {
 public:
  RecvSlots(transport::Transport& transport, device::Device& device, std::size_t floats);
  // Makes at least `count` slots; must not be called while a receive into them is pending.
  void reserve(std::size_t count);
  std::size_t floats() const { return floats_; }
  std::size_t count() const { return count_; }
  transport::Region& region() { return *region_; }
  transport::ByteRange range(std::size_t k) const {
    return {k * stride_ * sizeof(float), floats_ * sizeof(float)};
  }
  std::span<float> slot(std::size_t k) { return storage_.span().subspan(k * stride_, floats_); }

 private:
  transport::Transport& transport_;
  device::Device& device_;
  std::size_t floats_, stride_;
  std::size_t count_ = 0;
  device::Array storage_;
  std::unique_ptr<transport::Region> region_;  // after the storage it registers
};

}  // namespace murmur::optimizers
