// libFuzzer target: the 48-byte frame header, as the tcp reader decodes it from the socket before
// it places (and sizes) anything for the payload. Input: a header (zero-padded to 48 bytes), then
// payload bytes. A header that decodes must be bounded (length <= max_frame_bytes, inside its
// message) and encode back to the same bytes; anything else must be a ProtocolError.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "transport/frame.h"

namespace {
// Small enough that a fuzzer finds the edge; the tcp backend's default is 1 GiB.
constexpr std::uint64_t kMaxFrame = 1 << 16;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace murmur::transport;
  FrameBytes bytes{};
  const std::size_t head = std::min(size, bytes.size());
  std::memcpy(bytes.data(), data, head);
  FrameHeader h;
  try {
    h = decode(bytes, kMaxFrame, "rank 1 (fuzz)");
  } catch (const murmur::ProtocolError&) {
    return 0;  // refused: the expected outcome for garbage
  }
  if (h.length > kMaxFrame || h.offset > h.total || h.length > h.total - h.offset) std::abort();
  // The reserved field (bytes 44..47) is not read: compare everything before it.
  FrameBytes again = encode(h);
  if (std::memcmp(again.data(), bytes.data(), 44) != 0) std::abort();
  // The CRC over what payload there is, as the reader checks it once the payload has arrived.
  const std::size_t avail = size - head;
  const std::size_t n = std::min<std::uint64_t>(avail, h.length);
  std::span<const std::byte> payload(reinterpret_cast<const std::byte*>(data + head), n);
  volatile std::uint32_t crc = payload_crc(header_crc(h), payload);
  (void)crc;
  return 0;
}
