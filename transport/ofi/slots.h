// Fixed-size bounce buffers for the ofi protocol's small messages (message heads with up to
// Slots::kInline bytes of payload, clear-to-send notes), carved from slabs registered once so
// that providers wanting FI_MR_LOCAL get a descriptor. A slab is added when all slots are taken;
// nothing is returned to the system before the Slots are destroyed, which must happen before
// the domain closes. Owned by one ofi::Transport; thread-compatible.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "transport/ofi/region.h"

namespace murmur::transport::ofi {

class Slots {
 public:
  static constexpr std::size_t kSize = 8192;
  using MakeRegion = std::function<std::unique_ptr<Region>(std::span<std::byte>)>;

  struct Slot {
    std::byte* data = nullptr;
    void* desc = nullptr;
    explicit operator bool() const { return data != nullptr; }
  };

  explicit Slots(MakeRegion make) : make_(std::move(make)) {}

  // A free slot of kSize bytes; registers a new slab if none is left. Throws TransportError.
  Slot acquire();
  void release(Slot slot) { free_.push_back(slot); }

 private:
  static constexpr std::size_t kPerSlab = 64;
  struct Slab {
    std::vector<std::byte> bytes;
    std::unique_ptr<Region> region;
  };

  MakeRegion make_;
  std::vector<Slab> slabs_;
  std::vector<Slot> free_;
};

}  // namespace murmur::transport::ofi
