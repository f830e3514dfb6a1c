#include "core/crc32c.h"

#include <algorithm>
#include <array>
#include <cstring>

#ifdef MURMUR_HAVE_ISAL
#include <isa-l/crc.h>
#endif

#if defined(__SSE4_2__) && defined(__x86_64__)
#include <nmmintrin.h>
#define MURMUR_CRC32C_SSE42 1
#endif

namespace murmur {
namespace {

constexpr std::uint32_t kPoly = 0x82F63B78;  // 0x1EDC6F41 bit-reversed

// tables[k][b]: the CRC of byte b followed by k zero bytes, for slicing-by-8 (Intel, Kounavis
// and Berry 2005): eight table lookups per 8 input bytes instead of eight dependent steps.
constexpr std::array<std::array<std::uint32_t, 256>, 8> make_tables() {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t crc = b;
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ (kPoly & (0u - (crc & 1u)));
    t[0][b] = crc;
  }
  for (std::size_t k = 1; k < 8; ++k) {
    for (std::uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  }
  return t;
}

std::uint32_t crc_table(const unsigned char* p, std::size_t n, std::uint32_t crc) {
  static constexpr auto kTables = make_tables();
  while (n >= 8) {
    std::uint32_t lo, hi;
    std::memcpy(&lo, p, 4);  // little-endian host assumed, as everywhere in murmur
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
          kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
          kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = (crc >> 8) ^ kTables[0][(crc ^ *p++) & 0xFF];
  return crc;
}

#ifdef MURMUR_CRC32C_SSE42
// One dependent chain of crc32 instructions: ~8 bytes per 3 cycles (the instruction's latency).
std::uint32_t crc_sse42_serial(const unsigned char* p, std::size_t n, std::uint32_t crc) {
  std::uint64_t c = crc;
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<std::uint32_t>(c);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

// The raw CRC register is linear in its state over runs of zero bytes, so "append `len` zero
// bytes" is a 32x32 GF(2) matrix; tabulated per state byte it is four lookups (Mark Adler's
// crc32c.c, crc32c_zeros). Built once from 32 runs of the serial path over zeros.
struct ZeroShift {
  std::array<std::array<std::uint32_t, 256>, 4> table{};
  explicit ZeroShift(std::size_t len) {
    const std::array<unsigned char, 8192> zeros{};
    std::array<std::uint32_t, 32> bit{};
    for (int i = 0; i < 32; ++i) {
      std::uint32_t c = 1u << i;
      for (std::size_t left = len; left > 0;) {
        const std::size_t step = left < zeros.size() ? left : zeros.size();
        c = crc_sse42_serial(zeros.data(), step, c);
        left -= step;
      }
      bit[i] = c;
    }
    for (int k = 0; k < 4; ++k) {
      for (std::uint32_t b = 0; b < 256; ++b) {
        std::uint32_t r = 0;
        for (int j = 0; j < 8; ++j) r ^= (b >> j & 1u) ? bit[8 * k + j] : 0u;
        table[k][b] = r;
      }
    }
  }
  std::uint32_t operator()(std::uint32_t c) const {
    return table[0][c & 0xFF] ^ table[1][(c >> 8) & 0xFF] ^ table[2][(c >> 16) & 0xFF] ^
           table[3][c >> 24];
  }
};

// Three independent chains over three adjacent blocks keep the crc32 unit busy every cycle
// (throughput 1, latency 3); their results are joined by shifting over the later blocks.
template <std::size_t kBlock>
std::uint32_t crc_sse42_3way(const unsigned char*& p, std::size_t& n, std::uint32_t crc) {
  static const ZeroShift shift(kBlock);
  for (; n >= 3 * kBlock; p += 3 * kBlock, n -= 3 * kBlock) {
    std::uint64_t c0 = crc, c1 = 0, c2 = 0;
    for (std::size_t i = 0; i < kBlock; i += 8) {
      std::uint64_t w0, w1, w2;
      std::memcpy(&w0, p + i, 8);
      std::memcpy(&w1, p + kBlock + i, 8);
      std::memcpy(&w2, p + 2 * kBlock + i, 8);
      c0 = _mm_crc32_u64(c0, w0);
      c1 = _mm_crc32_u64(c1, w1);
      c2 = _mm_crc32_u64(c2, w2);
    }
    crc = shift(static_cast<std::uint32_t>(c0)) ^ static_cast<std::uint32_t>(c1);
    crc = shift(crc) ^ static_cast<std::uint32_t>(c2);
  }
  return crc;
}

std::uint32_t crc_sse42(const unsigned char* p, std::size_t n, std::uint32_t crc) {
  crc = crc_sse42_3way<4096>(p, n, crc);
  crc = crc_sse42_3way<256>(p, n, crc);
  return crc_sse42_serial(p, n, crc);
}
#endif

}  // namespace

std::uint32_t crc32c(std::span<const std::byte> bytes, std::uint32_t seed) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
#if defined(MURMUR_HAVE_ISAL)
  // ISA-L picks its kernel for this CPU at run time. It keeps the register uninverted, and its
  // length is an int: pieces of 1 GiB at most.
  std::uint32_t crc = ~seed;
  std::size_t n = bytes.size();
  do {
    const std::size_t piece = std::min<std::size_t>(n, std::size_t{1} << 30);
    crc = crc32_iscsi(const_cast<unsigned char*>(p), static_cast<int>(piece), crc);
    p += piece;
    n -= piece;
  } while (n > 0);
  return ~crc;
#elif defined(MURMUR_CRC32C_SSE42)
  return ~crc_sse42(p, bytes.size(), ~seed);
#else
  return ~crc_table(p, bytes.size(), ~seed);
#endif
}

std::uint32_t crc32c_portable(std::span<const std::byte> bytes, std::uint32_t seed) {
  return ~crc_table(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), ~seed);
}

bool crc32c_is_hardware() {
#if defined(MURMUR_CRC32C_SSE42) || defined(MURMUR_HAVE_ISAL)
  return true;
#else
  return false;
#endif
}

}  // namespace murmur
