#include "transport/tag.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::transport {

namespace {
constexpr int kFixedBits = kPurposeBits + kEpochBits + kRoundBits;
constexpr Tag mask(int bits) { return bits >= 64 ? ~Tag{0} : (Tag{1} << bits) - 1; }
}  // namespace

TagLayout::TagLayout(int world_size, int tag_bits, std::string_view backend) {
  if (world_size < 1) throw TransportError(fmt::format("tag layout: a world of {} ranks", world_size));
  // A ring of N ranks takes 2(N-1) steps (reduce-scatter, then allgather).
  const auto steps = static_cast<std::uint64_t>(2 * (world_size - 1));
  step_bits_ = std::max(1, static_cast<int>(std::bit_width(steps)));
  const int left = tag_bits - kFixedBits - step_bits_;
  if (left < kMinChunkBits) {
    throw TransportError(fmt::format(
        "{}{}a world of {} ranks needs {} tag bits ({} for purpose, epoch and round, {} for the "
        "ring's steps, {} for pieces of a transfer), but the backend leaves {}",
        backend, backend.empty() ? "" : ": ", world_size, kFixedBits + step_bits_ + kMinChunkBits,
        kFixedBits, step_bits_, kMinChunkBits, tag_bits));
  }
  chunk_bits_ = std::min(left, kMaxChunkBits);
}

TagLayout::TagLayout(const Transport& transport)
    : TagLayout(transport.world_size(), transport.tag_bits(), transport.name()) {}

Tag TagLayout::make(unsigned purpose, std::int64_t round, std::uint64_t step, std::uint64_t chunk,
                    unsigned epoch) const {
  if (purpose == 0 || purpose >= purpose::kCount) {
    throw Error(fmt::format("tag: purpose {} is outside 1..{}", purpose, purpose::kCount - 1));
  }
  const int low = step_bits_ + chunk_bits_;
  const Tag high = (Tag{purpose} << (kEpochBits + kRoundBits)) |
                   (Tag{epoch & mask(kEpochBits)} << kRoundBits) |
                   (static_cast<Tag>(round) & mask(kRoundBits));
  return with(high << low, step, chunk);
}

Tag TagLayout::with(Tag base, std::uint64_t step, std::uint64_t chunk) const {
  if (!is_base(base)) throw Error(fmt::format("tag {:#x}: its step and chunk are taken", base));
  if (step >= max_steps() || chunk >= max_chunks()) {
    throw Error(fmt::format("tag: step {} or chunk {} beyond the layout's {} steps and {} chunks",
                            step, chunk, max_steps(), max_chunks()));
  }
  return base | (step << chunk_bits_) | chunk;
}

Tag TagLayout::with_epoch(Tag tag, unsigned epoch) const {
  const int shift = chunk_bits_ + step_bits_ + kRoundBits;
  return (tag & ~(mask(kEpochBits) << shift)) | (Tag{epoch & mask(kEpochBits)} << shift);
}

TagFields TagLayout::fields(Tag tag) const {
  TagFields f;
  f.chunk = tag & mask(chunk_bits_);
  f.step = (tag >> chunk_bits_) & mask(step_bits_);
  const Tag high = tag >> (chunk_bits_ + step_bits_);
  f.round = high & mask(kRoundBits);
  f.epoch = static_cast<unsigned>((high >> kRoundBits) & mask(kEpochBits));
  f.purpose = static_cast<unsigned>((high >> (kRoundBits + kEpochBits)) & mask(kPurposeBits));
  return f;
}

std::string TagLayout::describe(Tag tag) const {
  const TagFields f = fields(tag);
  return fmt::format("purpose {}, epoch {}, round {}, step {}, chunk {}", f.purpose, f.epoch,
                     f.round, f.step, f.chunk);
}

}  // namespace murmur::transport
