#include "nn/cuda/device_arena.h"

#include <fmt/format.h>

#include "core/error.h"
#include "nn/cuda/check.h"

namespace murmur::nn::cuda {

DeviceArena::DeviceArena(const Arena& layout)
    : entries_(layout.entries()), floats_(layout.flat().size()) {
  if (!layout.allocated()) throw Error("DeviceArena: the host arena is not allocated");
  buffer_ = DeviceBuffer(floats_ * sizeof(float));
}

float* DeviceArena::view(std::size_t index) const {
  if (index >= entries_.size())
    throw Error(fmt::format("DeviceArena: no tensor #{} (of {})", index, entries_.size()));
  return data() + entries_[index].offset;
}

float* DeviceArena::view(std::string_view name) const {
  auto index = find(name);
  if (!index) throw Error(fmt::format("DeviceArena: no tensor named '{}'", name));
  return view(*index);
}

std::optional<std::size_t> DeviceArena::find(std::string_view name) const {
  for (std::size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].name == name) return i;
  return std::nullopt;
}

void DeviceArena::check_layout(const Arena& host) const {
  // Same entries and offsets (Arena's own check), and the same padded size.
  const auto& theirs = host.entries();
  bool same = theirs.size() == entries_.size() && host.flat().size() == floats_;
  for (std::size_t i = 0; same && i < theirs.size(); ++i)
    same = theirs[i].name == entries_[i].name && theirs[i].shape == entries_[i].shape &&
           theirs[i].offset == entries_[i].offset;
  if (!same)
    throw Error(fmt::format("DeviceArena: host arena of {} tensors / {} floats has another layout "
                            "than this one ({} tensors / {} floats)",
                            theirs.size(), host.flat().size(), entries_.size(), floats_));
}

void DeviceArena::copy_from_host(const Arena& host, cudaStream_t stream) {
  check_layout(host);
  if (floats_ == 0) return;
  MURMUR_CUDA_CHECK(
      cudaMemcpyAsync(data(), host.flat().data(), bytes(), cudaMemcpyHostToDevice, stream));
}

void DeviceArena::copy_to_host(Arena& host, cudaStream_t stream) const {
  check_layout(host);
  if (floats_ == 0) return;
  MURMUR_CUDA_CHECK(
      cudaMemcpyAsync(host.flat().data(), data(), bytes(), cudaMemcpyDeviceToHost, stream));
}

void DeviceArena::copy_from(const DeviceArena& other, cudaStream_t stream) {
  if (other.floats_ != floats_ || other.entries_.size() != entries_.size())
    throw Error("DeviceArena: copy_from an arena of another layout");
  if (floats_ == 0) return;
  MURMUR_CUDA_CHECK(
      cudaMemcpyAsync(data(), other.data(), bytes(), cudaMemcpyDeviceToDevice, stream));
}

void DeviceArena::zero(cudaStream_t stream) {
  if (floats_ > 0) MURMUR_CUDA_CHECK(cudaMemsetAsync(data(), 0, bytes(), stream));
}

}  // namespace murmur::nn::cuda
