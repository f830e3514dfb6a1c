// libFuzzer target: the three handshake messages (Hello, Reply, Proof) as an acceptor or a dialer
// reads them from a stranger. Input: one selector byte, then the message (zero-padded to its
// size). A message that decodes must encode back to the same bytes, and a MAC computed over it
// with our secret must not equal the one it carries (a forgery would need the secret).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "transport/handshake.h"

namespace {

template <std::size_t N>
std::array<std::byte, N> take(const std::uint8_t* data, std::size_t size) {
  std::array<std::byte, N> b{};
  std::memcpy(b.data(), data, std::min(size, N));
  return b;
}

constexpr std::string_view kSecret = "fuzz secret";

// Our side's nonce: fixed, so that a run replays exactly (the tcp backend draws fresh_nonce()).
murmur::transport::Nonce our_nonce() {
  murmur::transport::Nonce n;
  n.fill(std::byte{0x5a});
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace murmur::transport;
  if (size == 0) return 0;
  const std::uint8_t which = data[0] % 3;
  ++data;
  --size;
  try {
    if (which == 0) {
      auto b = take<Hello::kBytes>(data, size);
      Hello m = decode_hello(b, "fuzz");
      if (encode(m) != b) std::abort();
      // The acceptor answers a Hello it accepts with a MAC over it.
      (void)handshake_mac(kSecret, kReplyLabel, m, our_nonce(), m.rank + 1);
    } else if (which == 1) {
      auto b = take<Reply::kBytes>(data, size);
      Reply m = decode_reply(b, "fuzz");
      if (encode(m) != b) std::abort();
      // The dialer's check: the Reply's MAC against one over the dialer's own nonce.
      Hello hello{0, m.world_size, our_nonce()};
      if (mac_equal(m.mac, handshake_mac(kSecret, kReplyLabel, hello, m.nonce, m.rank))) std::abort();
    } else {
      auto b = take<Proof::kBytes>(data, size);
      Proof m = decode_proof(b, "fuzz");
      if (encode(m) != b) std::abort();
      Hello hello{0, 2, our_nonce()};
      if (mac_equal(m.mac, handshake_mac(kSecret, kProofLabel, hello, our_nonce(), 1))) std::abort();
    }
  } catch (const murmur::ProtocolError&) {
  }
  return 0;
}
