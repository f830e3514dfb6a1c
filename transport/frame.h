// The wire format of a data frame: a fixed 48-byte little-endian header (magic, version, kind,
// tag, payload length, offset of the payload in its message, message total, CRC32C) followed by
// the payload. A message larger than transport.chunk_bytes travels as several frames of one tag,
// in order. A heartbeat is a header alone (kind 2, every other field zero but the CRC), sent on
// an idle connection so that the other end can tell a live peer that has nothing to say from a
// dead or cut-off one. An abort (kind 3, a header alone: the tag, offset and total of a message
// under way, length zero) says its sender cancelled that message after `offset` bytes: the rest
// never comes, and the stream goes on with the next frame. The CRC32C covers the header (with
// the crc field zero) and the payload, and is checked on receipt. Pure functions; thread-safe.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace murmur::transport {

inline constexpr std::uint32_t kFrameMagic = 0x464d524d;  // "MRMF"
inline constexpr std::uint32_t kHandshakeMagic = 0x484d524d;  // "MRMH"
inline constexpr std::uint16_t kWireVersion = 1;

enum class FrameKind : std::uint16_t { kData = 1, kHeartbeat = 2, kAbort = 3 };

struct FrameHeader {
  FrameKind kind = FrameKind::kData;
  std::uint64_t tag = 0;
  std::uint64_t length = 0;  // payload bytes in this frame
  std::uint64_t offset = 0;  // where the payload starts in its message
  std::uint64_t total = 0;   // bytes of the whole message
  std::uint32_t crc = 0;     // CRC32C over the header (crc field zero) and the payload
  static constexpr std::size_t kBytes = 48;
};
using FrameBytes = std::array<std::byte, FrameHeader::kBytes>;

// Encodes `h` with its crc field as given.
FrameBytes encode(const FrameHeader& h);
// Decodes and checks magic, version, kind, length <= max_frame_bytes and offset + length <=
// total (a heartbeat: tag, length, offset and total all zero), before the caller allocates anything for the payload. Throws ProtocolError naming
// `peer` ("rank 3 (10.0.0.2:4000)") and the field at fault.
FrameHeader decode(const FrameBytes& bytes, std::uint64_t max_frame_bytes, std::string_view peer);

// CRC32C of the header with crc = 0: the seed to continue over the payload.
std::uint32_t header_crc(const FrameHeader& h);
// Continues a CRC32C over `payload`.
std::uint32_t payload_crc(std::uint32_t seed, std::span<const std::byte> payload);

// Little-endian field access for the wire encodings. Every target we build for (x86-64, arm64)
// is little-endian, so a plain copy is the encoding.
static_assert(std::endian::native == std::endian::little, "the wire format assumes little-endian");
template <class T>
inline void store_le(std::byte* at, T value) {
  std::memcpy(at, &value, sizeof value);
}
template <class T>
inline T load_le(const std::byte* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

}  // namespace murmur::transport
