#include "core/half.h"

#include <bit>
#include <cmath>

namespace murmur {

std::uint16_t to_fp16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u)
    return static_cast<std::uint16_t>(sign | (abs > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (abs >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds to >= 65520
  if (abs < 0x38800000u) {  // below 2^-14: a subnormal half (or zero)
    // Scale into the subnormal grid (units of 2^-24) with round-to-nearest-even by the FPU.
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(scaled)));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to even.
  std::uint32_t h = (abs - 0x38000000u) >> 13;
  const std::uint32_t rest = abs & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

float from_fp16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0) {
    const float v = static_cast<float>(man) * 0x1.0p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

std::uint16_t to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>((x + rounding) >> 16);
}

float from_bf16(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

// `nearest` is f rounded to nearest, with f's sign; the other neighbour of f is the next code
// towards f (codes of one sign are ordered by magnitude). Below f's magnitude nearest is
// nonzero (|f| > |a| >= 0 is the other case), so the step down stays within the sign; a step
// up past the largest finite code gives infinity, and nearest is kept.
std::uint16_t to_half_stochastic(float f, HalfFormat format, Rng& rng) {
  const std::uint16_t nearest = to_half(f, format);
  const float a = from_half(nearest, format);
  if (a == f || !std::isfinite(a) || !std::isfinite(f)) return nearest;
  const auto other = static_cast<std::uint16_t>(std::fabs(a) < std::fabs(f) ? nearest + 1
                                                                             : nearest - 1);
  const float b = from_half(other, format);
  if (!std::isfinite(b)) return nearest;
  // P(b) = |f - a| / |b - a|: the farther f is from a, the likelier b.
  const double p = static_cast<double>(std::fabs(f - a)) / std::fabs(b - a);
  return rng.uniform() < p ? other : nearest;
}

void narrow(std::span<const float> in, std::span<std::uint16_t> out, HalfFormat format,
            Rng* rng) {
  if (rng && format == HalfFormat::kBf16) {
    // bf16 is fp32's top half: adding 16 random bits to the bottom half and truncating rounds
    // up with probability (bottom half) / 2^16, the distance to the code below over the gap, as
    // to_half_stochastic() does, at a quarter of a random draw per value. Non-finite values
    // (and those that would carry into infinity) round to nearest.
    std::uint64_t bits = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (i % 4 == 0) bits = rng->next_u64();
      const std::uint32_t x = std::bit_cast<std::uint32_t>(in[i]);
      const std::uint32_t up = x + static_cast<std::uint32_t>(bits & 0xFFFFu);
      bits >>= 16;
      const bool finite = (x & 0x7F800000u) != 0x7F800000u && (up & 0x7F800000u) != 0x7F800000u;
      out[i] = finite ? static_cast<std::uint16_t>(up >> 16) : to_bf16(in[i]);
    }
  } else if (rng) {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = to_half_stochastic(in[i], format, *rng);
  } else if (format == HalfFormat::kBf16) {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = to_bf16(in[i]);
  } else {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = to_fp16(in[i]);
  }
}

void widen(std::span<const std::uint16_t> in, std::span<float> out, HalfFormat format) {
  if (format == HalfFormat::kBf16) {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = from_bf16(in[i]);
  } else {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = from_fp16(in[i]);
  }
}

void widen_add(std::span<const std::uint16_t> in, std::span<float> out, HalfFormat format) {
  if (format == HalfFormat::kBf16) {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] += from_bf16(in[i]);
  } else {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] += from_fp16(in[i]);
  }
}

}  // namespace murmur
