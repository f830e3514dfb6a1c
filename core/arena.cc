#include "core/arena.h"

#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur {

std::size_t Arena::declare(std::string name, std::vector<std::int64_t> shape) {
  if (allocated_) throw Error(fmt::format("Arena: declare('{}') after allocate()", name));
  if (name.empty()) throw Error("Arena: a tensor needs a name");
  if (find(name)) throw Error(fmt::format("Arena: tensor '{}' declared twice", name));
  std::size_t numel = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw Error(fmt::format("Arena: tensor '{}' has a negative dimension", name));
    numel *= static_cast<std::size_t>(d);
  }
  entries_.push_back(ArenaEntry{std::move(name), std::move(shape), 0, numel});
  return entries_.size() - 1;
}

void Arena::allocate() {
  if (allocated_) throw Error("Arena: allocate() called twice");
  std::size_t offset = 0;
  for (ArenaEntry& e : entries_) {
    e.offset = offset;
    // Round every tensor up to the alignment unit so the next one starts on a 256-byte line.
    offset += (e.numel + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }
  buffer_ = HostBuffer::floats(offset);
  allocated_ = true;
}

std::span<float> Arena::view(std::size_t index) {
  auto v = static_cast<const Arena*>(this)->view(index);
  return {const_cast<float*>(v.data()), v.size()};
}

std::span<const float> Arena::view(std::size_t index) const {
  if (!allocated_) throw Error("Arena: view() before allocate()");
  if (index >= entries_.size())
    throw Error(fmt::format("Arena: no tensor #{} (of {})", index, entries_.size()));
  const ArenaEntry& e = entries_[index];
  return flat().subspan(e.offset, e.numel);
}

std::span<float> Arena::view(std::string_view name) {
  auto index = find(name);
  if (!index) throw Error(fmt::format("Arena: no tensor named '{}'", name));
  return view(*index);
}

std::span<const float> Arena::view(std::string_view name) const {
  auto index = find(name);
  if (!index) throw Error(fmt::format("Arena: no tensor named '{}'", name));
  return view(*index);
}

std::optional<std::size_t> Arena::find(std::string_view name) const {
  // Linear scan: arenas hold tens of tensors and lookups by name happen at setup, not per step.
  for (std::size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].name == name) return i;
  return std::nullopt;
}

std::size_t Arena::num_elements() const {
  return std::accumulate(entries_.begin(), entries_.end(), std::size_t{0},
                         [](std::size_t s, const ArenaEntry& e) { return s + e.numel; });
}

Arena Arena::clone_layout() const {
  Arena copy;
  copy.entries_ = entries_;
  if (allocated_) {
    copy.buffer_ = HostBuffer(buffer_.size());
    copy.allocated_ = true;
  }
  return copy;
}

void Arena::check_same_layout(const Arena& other) const {
  if (entries_.size() != other.entries_.size())
    throw Error(fmt::format("Arena: layouts differ: {} vs {} tensors", entries_.size(),
                            other.entries_.size()));
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const ArenaEntry& a = entries_[i];
    const ArenaEntry& b = other.entries_[i];
    if (a.name != b.name || a.shape != b.shape || a.offset != b.offset)
      throw Error(fmt::format("Arena: layouts differ at tensor #{} ('{}' vs '{}')", i, a.name,
                              b.name));
  }
}

}  // namespace murmur
