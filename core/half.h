// 16-bit floats: IEEE binary16 (fp16) and bfloat16 (bf16), as the wire formats of compressed
// gossip (optimizers/compressor.h) and of the 16-bit allreduce and gossip (algorithm.wire,
// transport/half_ring_allreduce.h). Rounding to nearest (even) keeps a relative error of 2^-11
// (fp16) or 2^-8 (bf16) but is biased for a value rounded again and again; stochastic rounding
// (Gupta et al. 2015, "Deep Learning with Limited Numerical Precision") picks one of the two
// neighbouring codes with probability by distance, so that E[widen(round(x))] = x.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/rng.h"

namespace murmur {

enum class HalfFormat { kFp16, kBf16 };

// Round to nearest even; NaN stays NaN, beyond the largest finite code is infinity.
std::uint16_t to_fp16(float f);
float from_fp16(std::uint16_t h);
std::uint16_t to_bf16(float f);
float from_bf16(std::uint16_t h);

inline std::uint16_t to_half(float f, HalfFormat format) {
  return format == HalfFormat::kBf16 ? to_bf16(f) : to_fp16(f);
}
inline float from_half(std::uint16_t h, HalfFormat format) {
  return format == HalfFormat::kBf16 ? from_bf16(h) : from_fp16(h);
}

// f rounded stochastically: the nearest code or the other neighbour of f, the farther f is from
// the nearest the likelier the other. Non-finite values and values beyond the largest finite
// code round to nearest.
std::uint16_t to_half_stochastic(float f, HalfFormat format, Rng& rng);

// Whole arrays (out.size() == in.size()): with `rng`, stochastically; without, to nearest.
void narrow(std::span<const float> in, std::span<std::uint16_t> out, HalfFormat format,
            Rng* rng = nullptr);
void widen(std::span<const std::uint16_t> in, std::span<float> out, HalfFormat format);
// out[i] += widen(in[i]): the fp32 accumulation of a 16-bit message.
void widen_add(std::span<const std::uint16_t> in, std::span<float> out, HalfFormat format);

}  // namespace murmur
