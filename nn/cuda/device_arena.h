// DeviceArena: a host Arena's twin in device memory. Same entries, same offsets, same padding
// (every tensor on a 256-byte boundary, cudaMalloc's alignment is at least that), so the whole
// arena crosses between host and device as one cudaMemcpy of bytes() and a tensor's device
// pointer is base + entry.offset. Owned by a CudaModel or optimizer; not thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/arena.h"
#include "nn/cuda/memory.h"

namespace murmur::nn::cuda {

class DeviceArena {
 public:
  DeviceArena() = default;
  // The layout of `layout` (which must be allocated), zeroed on the current device.
  // Throws Error if `layout` is not allocated, CudaError if the memory is not there.
  explicit DeviceArena(const Arena& layout);

  float* data() const { return buffer_.floats(); }
  std::size_t floats() const { return floats_; }  // padding included, as Arena::flat().size()
  std::size_t bytes() const { return floats_ * sizeof(float); }
  const std::vector<ArenaEntry>& entries() const { return entries_; }

  // A tensor's device pointer, by index or name. Throws Error for a bad index or unknown name.
  float* view(std::size_t index) const;
  float* view(std::string_view name) const;
  std::optional<std::size_t> find(std::string_view name) const;

  // Asynchronous whole-arena copies on `stream`; the host arena must have this layout (throws
  // Error otherwise) and stay alive and untouched until the stream reaches the copy.
  void copy_from_host(const Arena& host, cudaStream_t stream);
  void copy_to_host(Arena& host, cudaStream_t stream) const;
  // Device-to-device copy of a same-layout arena.
  void copy_from(const DeviceArena& other, cudaStream_t stream);
  void zero(cudaStream_t stream);

 private:
  void check_layout(const Arena& host) const;

  std::vector<ArenaEntry> entries_;
  std::size_t floats_ = 0;
  DeviceBuffer buffer_;
};

}  // namespace murmur::nn::cuda
