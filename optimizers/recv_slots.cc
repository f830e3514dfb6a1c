#include "optimizers/recv_slots.h"

#include "optimizers/device_arrays.h"

namespace murmur::optimizers {

RecvSlots::RecvSlots(transport::Transport& transport, device::Device& device, std::size_t floats)
    : transport_(transport), device_(device), floats_(floats), stride_((floats + 63) / 64 * 64) {
  if (stride_ == 0) stride_ = 64;
}

void RecvSlots::reserve(std::size_t count) {
  if (count <= count_) return;
  region_.reset();
  storage_ = device_.zeros(count * stride_);
  region_ = register_array(transport_, device_, storage_.span());
  count_ = count;
}

}  // namespace murmur::optimizers
