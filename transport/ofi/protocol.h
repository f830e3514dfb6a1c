// The few bytes the ofi backend adds to a message: the head that opens every message (its
// length, and whether its bytes follow inline) and the receiver's clear-to-send note that accepts
// or refuses an announced body. Both are 16 bytes: u32 magic, u32 flags, u64 length (host order:
// the providers here connect ranks of one build). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transport/ofi/slots.h"

namespace murmur::transport::ofi {

inline constexpr std::size_t kHeadBytes = 16;
// Messages up to this size travel inside their head, copied once through a slot on each side;
// longer ones wait for the clear-to-send and move from the caller's range to the caller's range.
inline constexpr std::size_t kInline = Slots::kSize - kHeadBytes;

struct Note {
  std::uint32_t magic = 0;
  std::uint32_t flags = 0;
  std::uint64_t length = 0;
};
inline constexpr std::uint32_t kHeadMagic = 0x4d4f4648;   // "HFOM"
inline constexpr std::uint32_t kClearMagic = 0x4d4f4643;  // "CFOM"
inline constexpr std::uint32_t kInlineFlag = 1;           // head: the bytes follow
inline constexpr std::uint32_t kAcceptFlag = 1;           // clear-to-send: send the body

inline void write_note(std::byte* at, std::uint32_t magic, std::uint32_t flags,
                       std::uint64_t length) {
  const Note n{magic, flags, length};
  std::memcpy(at, &n, sizeof n);
}
inline void write_head(std::byte* at, std::uint64_t length) {
  write_note(at, kHeadMagic, length <= kInline ? kInlineFlag : 0, length);
}

// Returns true iff `received` bytes at `at` hold a note with `magic`.
inline bool read_note(const std::byte* at, std::size_t received, std::uint32_t magic, Note* out) {
  static_assert(sizeof(Note) == kHeadBytes);
  if (received < kHeadBytes) return false;
  std::memcpy(out, at, sizeof *out);
  return out->magic == magic;
}

}  // namespace murmur::transport::ofi
