// One message that its receiver cannot trust until it is checked: the results a peer sends at
// the end of a run (runtime/result_gather.h), a model's description (api/). On the wire, under
// one base tag of transport/tag.h: a 24-byte header (chunk 0): magic u32, version u16, reserved
// u16, length u64, CRC32C u32 of the body, reserved u32 (little-endian); then the body (chunk 1).
// The receiver checks the header's magic, version and length before it allocates anything, and
// the body's size and CRC before it hands it on. Each use has a magic and a size bound of its
// own. Called by the thread that drives the transport.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport/transport.h"

namespace murmur::transport {

inline constexpr std::size_t kCheckedHeaderBytes = 24;

// What a kind of message is: its magic, format version, largest body, and its name in errors
// ("result": "a result of 99 bytes, outside 1..16777216").
struct CheckedKind {
  std::uint32_t magic = 0;
  std::uint16_t version = 1;
  std::uint64_t max_bytes = 0;
  const char* what = "message";
};

// How long to wait for a peer: given up when it has been silent for `silence`, or after
// `timeout` in all (wait_heard).
struct Patience {
  std::chrono::milliseconds silence{10000};
  std::chrono::milliseconds timeout{60000};
};

std::vector<std::byte> encode_checked_header(const CheckedKind& kind, std::string_view body);
// The body's length, after checking magic, version and length (1..kind.max_bytes); its CRC32C
// into *crc. Throws ProtocolError naming `from` ("rank 2") and the field at fault.
std::uint64_t decode_checked_header(const CheckedKind& kind, std::span<const std::byte> header,
                                    std::string_view from, std::uint32_t* crc);
// Throws ProtocolError naming `from` unless `body`'s CRC32C is `crc`.
void check_body(const CheckedKind& kind, std::string_view body, std::uint32_t crc,
                std::string_view from);

// Sends `body` (1..kind.max_bytes bytes) to `to` under `tag` and waits until both parts have
// left. Returns false (the sends cancelled) when `to` did not take them within `patience`.
// Throws TransportError as the transport does.
bool send_checked(Transport& transport, int to, Tag tag, const CheckedKind& kind,
                  std::string_view body, const Patience& patience);

// The receiving side: the header's receive is posted when this is made, so that a sender never
// waits on another's turn (post every one first, then finish() each).
class CheckedReceive {
 public:
  // Throws TransportError as the transport's recv() does.
  CheckedReceive(Transport& transport, int from, Tag tag, const CheckedKind& kind);
  ~CheckedReceive();
  CheckedReceive(CheckedReceive&&) noexcept;

  // The checked body, or nullopt when the sender sent nothing within `patience` (the receive is
  // then cancelled). Throws ProtocolError for a malformed message, and TransportError (PeerLost)
  // as the transport does.
  std::optional<std::string> finish(const Patience& patience);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace murmur::transport
