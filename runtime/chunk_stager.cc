#include "runtime/chunk_stager.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "optimizers/mixing_ops.h"

namespace murmur::runtime {

ChunkLayout::ChunkLayout(std::size_t n, std::size_t chunk_bytes)
    : floats(n), chunk_floats(std::max<std::size_t>(1, chunk_bytes / sizeof(float))) {
  if (count() > optimizers::kMaxChunks) {
    throw ConfigError(fmt::format(
        "transport.chunk_bytes: {} bytes cut the {}-byte parameters into {} chunks; a round's "
        "tags number at most {} (raise chunk_bytes)",
        chunk_bytes, n * sizeof(float), count(), optimizers::kMaxChunks));
  }
}

std::size_t ChunkLayout::size(std::size_t k) const {
  const std::size_t begin = first(k);
  return begin >= floats ? 0 : std::min(chunk_floats, floats - begin);
}

HostStager::HostStager(transport::Transport& transport, std::span<float> params,
                       std::size_t chunk_bytes)
    : ChunkStager(ChunkLayout(params.size(), chunk_bytes)),
      params_(params),
      out_(params.size()),
      out_region_(transport.register_region(std::as_writable_bytes(std::span(out_)))),
      slots_(transport, params.size()) {}

transport::ByteRange HostStager::in_range(std::size_t j, std::size_t k) const {
  const transport::ByteRange chunk = layout().bytes(k);
  return {slots_.range(j).offset + chunk.offset, chunk.size};
}

void HostStager::start_download(std::size_t k) {
  // A snapshot, not the arena itself: chunk k is mixed in place while its sends may still be
  // reading, exactly as on the device.
  const std::size_t first = layout().first(k), n = layout().size(k);
  std::memcpy(out_.data() + first, params_.data() + first, n * sizeof(float));
}

void HostStager::upload_and_mix(std::size_t k, std::span<const std::size_t> neighbors, float self,
                                std::span<const float> weights) {
  const std::size_t first = layout().first(k), n = layout().size(k);
  inputs_.clear();
  for (std::size_t j : neighbors) inputs_.push_back(slots_.slot(j).data() + first);
  // Per element, the same operations in the same order as Dpsgd's whole-array mix: the result
  // is bitwise the same however the array is cut.
  optimizers::mix(params_.subspan(first, n), self, inputs_, weights);
}

}  // namespace murmur::runtime
