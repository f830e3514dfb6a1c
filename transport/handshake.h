// The messages of the authenticated handshake that opens every connection, without any I/O:
// the dialer sends Hello (its rank and a fresh nonce), the acceptor answers Reply (its rank, its
// nonce and an HMAC-SHA256 over both nonces and ranks), the dialer answers Proof (an HMAC with a
// different label). A side without the secret cannot produce either MAC, and fresh nonces on both
// sides defeat replay. Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace murmur::transport {

using Nonce = std::array<std::byte, 32>;
using Mac = std::array<std::byte, 32>;

struct Hello {
  std::uint32_t rank = 0;
  std::uint32_t world_size = 0;
  Nonce nonce{};
  static constexpr std::size_t kBytes = 48;
};
struct Reply {
  std::uint32_t rank = 0;
  std::uint32_t world_size = 0;
  Nonce nonce{};
  Mac mac{};
  static constexpr std::size_t kBytes = 80;
};
struct Proof {
  Mac mac{};
  static constexpr std::size_t kBytes = 40;
};

// Fills a nonce from OpenSSL's CSPRNG; throws TransportError if it fails.
Nonce fresh_nonce();

// HMAC-SHA256(secret, label || dialer nonce || acceptor nonce || dialer rank || acceptor rank ||
// world size). `label` tells a Reply's MAC from a Proof's, so one cannot stand for the other.
Mac handshake_mac(std::string_view secret, std::string_view label, const Hello& hello,
                  const Nonce& acceptor_nonce, std::uint32_t acceptor_rank);
inline constexpr std::string_view kReplyLabel = "murmur/1 reply";
inline constexpr std::string_view kProofLabel = "murmur/1 proof";

// True iff the two MACs are equal, compared in constant time.
bool mac_equal(const Mac& a, const Mac& b);

// Wire encodings (little-endian, with magic and version). decode_* throw ProtocolError naming
// `peer` (an address) on a bad magic, version or kind.
std::array<std::byte, Hello::kBytes> encode(const Hello& m);
std::array<std::byte, Reply::kBytes> encode(const Reply& m);
std::array<std::byte, Proof::kBytes> encode(const Proof& m);
Hello decode_hello(const std::array<std::byte, Hello::kBytes>& b, std::string_view peer);
Reply decode_reply(const std::array<std::byte, Reply::kBytes>& b, std::string_view peer);
Proof decode_proof(const std::array<std::byte, Proof::kBytes>& b, std::string_view peer);

}  // namespace murmur::transport
