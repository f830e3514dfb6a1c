#include "transport/handshake.h"

#include <cstring>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <fmt/format.h>

#include "core/error.h"
#include "transport/frame.h"

namespace murmur::transport {

namespace {

enum class Step : std::uint16_t { kHello = 1, kReply = 2, kProof = 3 };

void put_prefix(std::byte* b, Step step) {
  store_le<std::uint32_t>(b, kHandshakeMagic);
  store_le<std::uint16_t>(b + 4, kWireVersion);
  store_le<std::uint16_t>(b + 6, static_cast<std::uint16_t>(step));
}

void check_prefix(const std::byte* b, Step step, std::string_view peer) {
  if (load_le<std::uint32_t>(b) != kHandshakeMagic) {
    throw ProtocolError(fmt::format("tcp: handshake from {}: not a murmur peer (bad magic)", peer));
  }
  if (auto v = load_le<std::uint16_t>(b + 4); v != kWireVersion) {
    throw ProtocolError(fmt::format("tcp: handshake from {}: wire version {} (this build speaks {})",
                                    peer, v, kWireVersion));
  }
  if (load_le<std::uint16_t>(b + 6) != static_cast<std::uint16_t>(step)) {
    throw ProtocolError(fmt::format("tcp: handshake from {}: unexpected step", peer));
  }
}

}  // namespace

Nonce fresh_nonce() {
  Nonce n;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1) {
    throw TransportError("tcp: handshake: RAND_bytes failed");
  }
  return n;
}

Mac handshake_mac(std::string_view secret, std::string_view label, const Hello& hello,
                  const Nonce& acceptor_nonce, std::uint32_t acceptor_rank) {
  std::array<std::byte, 32 + 32 + 12> fields;
  std::memcpy(fields.data(), hello.nonce.data(), 32);
  std::memcpy(fields.data() + 32, acceptor_nonce.data(), 32);
  store_le<std::uint32_t>(fields.data() + 64, hello.rank);
  store_le<std::uint32_t>(fields.data() + 68, acceptor_rank);
  store_le<std::uint32_t>(fields.data() + 72, hello.world_size);
  // An empty secret still goes through HMAC (key of length 0); OpenSSL wants a non-null key.
  static const unsigned char kEmpty = 0;
  const void* key = secret.empty() ? static_cast<const void*>(&kEmpty) : secret.data();
  EVP_MAC* hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* ctx = hmac ? EVP_MAC_CTX_new(hmac) : nullptr;
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", const_cast<char*>("SHA256"), 0),
                         OSSL_PARAM_construct_end()};
  Mac mac{};
  std::size_t out_len = 0;
  bool ok = ctx && EVP_MAC_init(ctx, static_cast<const unsigned char*>(key), secret.size(), params) &&
            EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(label.data()), label.size()) &&
            EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(fields.data()), fields.size()) &&
            EVP_MAC_final(ctx, reinterpret_cast<unsigned char*>(mac.data()), &out_len, mac.size());
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(hmac);
  if (!ok || out_len != mac.size()) throw TransportError("tcp: handshake: HMAC-SHA256 failed");
  return mac;
}

bool mac_equal(const Mac& a, const Mac& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::array<std::byte, Hello::kBytes> encode(const Hello& m) {
  std::array<std::byte, Hello::kBytes> b{};
  put_prefix(b.data(), Step::kHello);
  store_le<std::uint32_t>(&b[8], m.rank);
  store_le<std::uint32_t>(&b[12], m.world_size);
  std::memcpy(&b[16], m.nonce.data(), 32);
  return b;
}

std::array<std::byte, Reply::kBytes> encode(const Reply& m) {
  std::array<std::byte, Reply::kBytes> b{};
  put_prefix(b.data(), Step::kReply);
  store_le<std::uint32_t>(&b[8], m.rank);
  store_le<std::uint32_t>(&b[12], m.world_size);
  std::memcpy(&b[16], m.nonce.data(), 32);
  std::memcpy(&b[48], m.mac.data(), 32);
  return b;
}

std::array<std::byte, Proof::kBytes> encode(const Proof& m) {
  std::array<std::byte, Proof::kBytes> b{};
  put_prefix(b.data(), Step::kProof);
  std::memcpy(&b[8], m.mac.data(), 32);
  return b;
}

Hello decode_hello(const std::array<std::byte, Hello::kBytes>& b, std::string_view peer) {
  check_prefix(b.data(), Step::kHello, peer);
  Hello m;
  m.rank = load_le<std::uint32_t>(&b[8]);
  m.world_size = load_le<std::uint32_t>(&b[12]);
  std::memcpy(m.nonce.data(), &b[16], 32);
  return m;
}

Reply decode_reply(const std::array<std::byte, Reply::kBytes>& b, std::string_view peer) {
  check_prefix(b.data(), Step::kReply, peer);
  Reply m;
  m.rank = load_le<std::uint32_t>(&b[8]);
  m.world_size = load_le<std::uint32_t>(&b[12]);
  std::memcpy(m.nonce.data(), &b[16], 32);
  std::memcpy(m.mac.data(), &b[48], 32);
  return m;
}

Proof decode_proof(const std::array<std::byte, Proof::kBytes>& b, std::string_view peer) {
  check_prefix(b.data(), Step::kProof, peer);
  Proof m;
  std::memcpy(m.mac.data(), &b[8], 32);
  return m;
}

}  // namespace murmur::transport
