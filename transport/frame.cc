#include "transport/frame.h"

#include <fmt/format.h>

#include "core/crc32c.h"
#include "core/error.h"

namespace murmur::transport {

// Byte offsets of the header fields.
namespace {
constexpr std::size_t kMagicAt = 0, kVersionAt = 4, kKindAt = 6, kTagAt = 8, kLengthAt = 16,
                      kOffsetAt = 24, kTotalAt = 32, kCrcAt = 40, kReservedAt = 44;
}  // namespace

FrameBytes encode(const FrameHeader& h) {
  FrameBytes b{};
  store_le<std::uint32_t>(&b[kMagicAt], kFrameMagic);
  store_le<std::uint16_t>(&b[kVersionAt], kWireVersion);
  store_le<std::uint16_t>(&b[kKindAt], static_cast<std::uint16_t>(h.kind));
  store_le<std::uint64_t>(&b[kTagAt], h.tag);
  store_le<std::uint64_t>(&b[kLengthAt], h.length);
  store_le<std::uint64_t>(&b[kOffsetAt], h.offset);
  store_le<std::uint64_t>(&b[kTotalAt], h.total);
  store_le<std::uint32_t>(&b[kCrcAt], h.crc);
  store_le<std::uint32_t>(&b[kReservedAt], 0);
  return b;
}

FrameHeader decode(const FrameBytes& b, std::uint64_t max_frame_bytes, std::string_view peer) {
  auto fail = [&](std::string_view what) {
    return ProtocolError(fmt::format("tcp: frame from {}: {}", peer, what));
  };
  if (auto magic = load_le<std::uint32_t>(&b[kMagicAt]); magic != kFrameMagic) {
    throw fail(fmt::format("bad magic {:#010x}", magic));
  }
  if (auto v = load_le<std::uint16_t>(&b[kVersionAt]); v != kWireVersion) {
    throw fail(fmt::format("wire version {} (this build speaks {})", v, kWireVersion));
  }
  FrameHeader h;
  auto kind = load_le<std::uint16_t>(&b[kKindAt]);
  if (kind != static_cast<std::uint16_t>(FrameKind::kData) &&
      kind != static_cast<std::uint16_t>(FrameKind::kHeartbeat) &&
      kind != static_cast<std::uint16_t>(FrameKind::kAbort)) {
    throw fail(fmt::format("unknown frame kind {}", kind));
  }
  h.kind = static_cast<FrameKind>(kind);
  h.tag = load_le<std::uint64_t>(&b[kTagAt]);
  h.length = load_le<std::uint64_t>(&b[kLengthAt]);
  h.offset = load_le<std::uint64_t>(&b[kOffsetAt]);
  h.total = load_le<std::uint64_t>(&b[kTotalAt]);
  h.crc = load_le<std::uint32_t>(&b[kCrcAt]);
  // Checked here, before anyone sizes a buffer from these fields.
  if (h.length > max_frame_bytes) {
    throw fail(fmt::format("length {} exceeds transport.max_frame_bytes {}", h.length,
                           max_frame_bytes));
  }
  if (h.offset > h.total || h.length > h.total - h.offset) {
    throw fail(fmt::format("payload [{}, +{}) outside its message of {} bytes", h.offset,
                           h.length, h.total));
  }
  if (h.kind == FrameKind::kHeartbeat && (h.tag | h.length | h.offset | h.total) != 0) {
    throw fail("a heartbeat with a tag, a length, an offset or a total");
  }
  if (h.kind == FrameKind::kAbort && (h.length != 0 || h.offset == 0 || h.offset >= h.total)) {
    throw fail(fmt::format("an abort with a payload, or at offset {} of a message of {} bytes "
                           "(it must fall inside)", h.offset, h.total));
  }
  return h;
}

std::uint32_t header_crc(const FrameHeader& h) {
  FrameHeader zero = h;
  zero.crc = 0;
  FrameBytes b = encode(zero);
  return crc32c(std::span<const std::byte>(b));
}

std::uint32_t payload_crc(std::uint32_t seed, std::span<const std::byte> payload) {
  return crc32c(payload, seed);
}

}  // namespace murmur::transport
