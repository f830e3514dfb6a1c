// Arena: the flat parameter store of a model. Tensors are declared by name and shape (PyTorch
// state_dict names and layouts, e.g. "fc1.weight" [out, in]), then allocate() lays them out in
// one contiguous 256-byte aligned buffer, each tensor starting on a 256-byte boundary with zero
// padding between. Averaging, optimizers, checkpoints and transports use flat()/bytes() directly.
// Not thread-safe; views stay valid for the arena's life, also across a move.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/host_memory.h"

namespace murmur {

struct ArenaEntry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::size_t offset = 0;  // in floats from the start of flat(); a multiple of 64
  std::size_t numel = 0;
};

class Arena {
 public:
  // Floats per alignment unit: every entry starts at a multiple of this offset.
  static constexpr std::size_t kAlignFloats = HostBuffer::kAlignment / sizeof(float);

  Arena() = default;
  Arena(Arena&&) noexcept = default;
  Arena& operator=(Arena&&) noexcept = default;

  // Adds a tensor and returns its index. Throws Error if the arena is already allocated, the
  // name is empty or taken, or a dimension is negative.
  std::size_t declare(std::string name, std::vector<std::int64_t> shape);
  // Computes the offsets and allocates the zeroed buffer. Throws Error if called twice.
  void allocate();
  bool allocated() const { return allocated_; }

  // The whole buffer, padding included (empty before allocate()).
  std::span<float> flat() { return buffer_.as_floats(); }
  std::span<const float> flat() const { return buffer_.as_floats(); }
  std::span<std::byte> bytes() { return buffer_.bytes(); }
  std::span<const std::byte> bytes() const { return buffer_.bytes(); }

  // One tensor's numel floats. Throws Error before allocate(), for a bad index or unknown name.
  std::span<float> view(std::size_t index);
  std::span<const float> view(std::size_t index) const;
  std::span<float> view(std::string_view name);
  std::span<const float> view(std::string_view name) const;
  // The index of `name`, or nullopt.
  std::optional<std::size_t> find(std::string_view name) const;

  const std::vector<ArenaEntry>& entries() const { return entries_; }
  std::size_t size() const { return entries_.size(); }
  // Sum of numel over entries (padding excluded).
  std::size_t num_elements() const;

  // An arena with the same entries and offsets and a new zeroed buffer (allocated iff this is):
  // the gradient arena, optimizer state, a receive buffer for averaging.
  Arena clone_layout() const;
  // Throws Error unless `other` has the same names, shapes and offsets.
  void check_same_layout(const Arena& other) const;

 private:
  std::vector<ArenaEntry> entries_;
  HostBuffer buffer_;
  bool allocated_ = false;
};

}  // namespace murmur
