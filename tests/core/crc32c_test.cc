// CRC32C against the standard check value, a bit-at-a-time reference, and itself in pieces.
#include <cstdint>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include "core/crc32c.h"
#include "core/rng.h"

namespace {

// The definition, one bit at a time: slow, obviously right.
std::uint32_t crc32c_bitwise(std::span<const std::byte> bytes) {
  std::uint32_t crc = 0xFFFFFFFF;
  for (std::byte b : bytes) {
    crc ^= static_cast<std::uint32_t>(b);
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  murmur::Rng rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng.below(256));
  return out;
}

}  // namespace

TEST_CASE("crc32c matches the standard check values", "[crc32c]") {
  CHECK(murmur::crc32c("123456789") == 0xE3069283u);
  CHECK(murmur::crc32c_portable(std::as_bytes(std::span("123456789", 9))) == 0xE3069283u);
  CHECK(murmur::crc32c("") == 0u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, and of 0xFF.
  std::vector<std::byte> zeros(32, std::byte{0}), ones(32, std::byte{0xFF});
  CHECK(murmur::crc32c(zeros) == 0x8A9136AAu);
  CHECK(murmur::crc32c(ones) == 0x62A8AB43u);
}

TEST_CASE("crc32c agrees with the bitwise definition at every length and alignment", "[crc32c]") {
  // Lengths cross the 3 x 256 and 3 x 4096 blocks of the hardware path and their tails.
  const std::vector<std::byte> data = random_bytes(40000, 7);
  for (std::size_t offset = 0; offset < 9; ++offset) {
    for (std::size_t n = 0; n + offset <= data.size(); n += n < 1000 ? 13 : 1999) {
      const auto piece = std::span(data).subspan(offset, n);
      INFO("offset " << offset << " length " << n);
      REQUIRE(murmur::crc32c(piece) == crc32c_bitwise(piece));
      REQUIRE(murmur::crc32c_portable(piece) == crc32c_bitwise(piece));
    }
  }
}

TEST_CASE("crc32c is incremental", "[crc32c]") {
  const std::vector<std::byte> data = random_bytes(1 << 16, 11);
  const std::uint32_t whole = murmur::crc32c(data);
  for (std::size_t cut : {0u, 1u, 7u, 8u, 1000u, 65535u, 65536u}) {
    const auto a = std::span(data).first(cut);
    const auto b = std::span(data).subspan(cut);
    CHECK(murmur::crc32c(b, murmur::crc32c(a)) == whole);
    CHECK(murmur::crc32c_portable(b, murmur::crc32c_portable(a)) == whole);
  }
  // A single flipped bit changes the checksum.
  std::vector<std::byte> flipped = data;
  flipped[12345] ^= std::byte{0x10};
  CHECK(murmur::crc32c(flipped) != whole);
}
