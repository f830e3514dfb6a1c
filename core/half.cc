#include "core/half.h"

#include <bit>
#include <cmath>

#if defined(__F16C__)
#include <immintrin.h>  // the F16C conversions, 8 values an instruction (-march=native)
#endif

namespace murmur {

namespace {
// The scalar conversions, internal so that the array loops below inline them: the library is
// built with -fPIC, under which GCC does not inline an exported function into its own file.

// Branch-predictable, after Fabian Giesen's float_to_half_fast3_rtne: even a subnormal rounds by
// one float addition rather than a libm call.
std::uint16_t fp16_of(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7FFFFFFFu;
  std::uint32_t h;
  if (x >= 0x47800000u) {  // 65536 and above, infinity, NaN (quieted)
    h = x > 0x7F800000u ? 0x7E00u : 0x7C00u;
  } else if (x < 0x38800000u) {
    // Below 2^-14, a subnormal half or zero: adding 0.5, whose unit in the last place is 2^-24
    // (the subnormal spacing), lets the FPU round to nearest even; its bits are then the code.
    h = std::bit_cast<std::uint32_t>(std::bit_cast<float>(x) + 0.5f) - 0x3F000000u;
  } else {
    // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even. A
    // carry out of the mantissa moves to the next exponent, up to 0x7C00 (infinity) from 65520.
    h = (x + 0xC8000FFFu + ((x >> 13) & 1u)) >> 13;
  }
  return static_cast<std::uint16_t>(h | sign);
}

float float_of_fp16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0) {
    const float v = static_cast<float>(man) * 0x1.0p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

std::uint16_t bf16_of(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>((x + rounding) >> 16);
}

float float_of_bf16(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}
}  // namespace

std::uint16_t to_fp16(float f) { return fp16_of(f); }
float from_fp16(std::uint16_t h) { return float_of_fp16(h); }
std::uint16_t to_bf16(float f) { return bf16_of(f); }
float from_bf16(std::uint16_t h) { return float_of_bf16(h); }

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
      out[i] = finite ? static_cast<std::uint16_t>(up >> 16) : bf16_of(in[i]);
    }
  } else if (rng) {
    // fp16: a normal result's 13 dropped bits take 13 random bits the same way; subnormal
    // results (another spacing), and those that would carry into infinity, the general way.
    std::uint64_t bits = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (i % 4 == 0) bits = rng->next_u64();
      const std::uint32_t x = std::bit_cast<std::uint32_t>(in[i]);
      const std::uint32_t abs = x & 0x7FFFFFFFu;
      const std::uint32_t h = (abs + 0xC8000000u + static_cast<std::uint32_t>(bits & 0x1FFFu)) >> 13;
      bits >>= 16;
      if (abs >= 0x38800000u && h < 0x7C00u) {
        out[i] = static_cast<std::uint16_t>(h | ((x >> 16) & 0x8000u));
      } else {
        out[i] = to_half_stochastic(in[i], format, *rng);
      }
    }
  } else if (format == HalfFormat::kBf16) {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = bf16_of(in[i]);
  } else {
    std::size_t i = 0;
#if defined(__F16C__)
    // The hardware rounds to nearest even as fp16_of() does: the same codes, NaN aside.
    for (; i + 8 <= in.size(); i += 8) {
      const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in.data() + i), _MM_FROUND_TO_NEAREST_INT);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out.data() + i), h);
    }
#endif
    for (; i < in.size(); ++i) out[i] = fp16_of(in[i]);
  }
}

void widen(std::span<const std::uint16_t> in, std::span<float> out, HalfFormat format) {
  if (format == HalfFormat::kBf16) {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = float_of_bf16(in[i]);
  } else {
    std::size_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= in.size(); i += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in.data() + i));
      _mm256_storeu_ps(out.data() + i, _mm256_cvtph_ps(h));
    }
#endif
    for (; i < in.size(); ++i) out[i] = float_of_fp16(in[i]);
  }
}

void widen_add(std::span<const std::uint16_t> in, std::span<float> out, HalfFormat format) {
  if (format == HalfFormat::kBf16) {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] += float_of_bf16(in[i]);
  } else {
    std::size_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= in.size(); i += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in.data() + i));
      _mm256_storeu_ps(out.data() + i, _mm256_add_ps(_mm256_loadu_ps(out.data() + i), _mm256_cvtph_ps(h)));
    }
#endif
    for (; i < in.size(); ++i) out[i] += float_of_fp16(in[i]);
  }
}

}  // namespace murmur
