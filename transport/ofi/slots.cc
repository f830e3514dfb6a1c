#include "transport/ofi/slots.h"

namespace murmur::transport::ofi {

Slots::Slot Slots::acquire() {
  if (free_.empty()) {
    Slab slab;
    slab.bytes.resize(kSize * kPerSlab);
    slab.region = make_(slab.bytes);
    for (std::size_t i = 0; i < kPerSlab; ++i) {
      free_.push_back(Slot{slab.bytes.data() + i * kSize, slab.region->desc()});
    }
    slabs_.push_back(std::move(slab));  // moving the vector keeps its buffer where it is
  }
  Slot slot = free_.back();
  free_.pop_back();
  return slot;
}

}  // namespace murmur::transport::ofi
