// 16-bit floats (core/half.h): fp16 and bf16 round to nearest even and round-trip every code;
// the array forms agree with the scalar ones; stochastic rounding is unbiased and only ever
// picks one of the two neighbouring codes.
#include "core/half.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

namespace murmur {
namespace {

TEST_CASE("fp16 conversion rounds to nearest even and round-trips every half", "[half]") {
  CHECK(to_fp16(1.0f) == 0x3C00);
  CHECK(to_fp16(-2.0f) == 0xC000);
  CHECK(to_fp16(65504.0f) == 0x7BFF);
  CHECK(to_fp16(65519.0f) == 0x7BFF);
  CHECK(to_fp16(65520.0f) == 0x7C00);               // rounds up to infinity
  CHECK(to_fp16(1.0f + 0x1.0p-11f) == 0x3C00);      // tie: to even
  CHECK(to_fp16(1.0f + 3 * 0x1.0p-11f) == 0x3C02);  // tie: to even, upwards
  CHECK(to_fp16(0x1.0p-24f) == 0x0001);             // smallest subnormal
  CHECK(to_fp16(0x1.0p-26f) == 0x0000);             // below half of it
  CHECK(to_fp16(0x1.8p-24f) == 0x0002);             // subnormal tie: to even
  CHECK(std::isnan(from_fp16(to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isinf(from_fp16(to_fp16(std::numeric_limits<float>::infinity()))));
  int bad = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = from_fp16(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    if (to_fp16(f) != h) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("bf16 conversion rounds to nearest even and round-trips every bfloat", "[half]") {
  CHECK(to_bf16(1.0f) == 0x3F80);
  CHECK(to_bf16(1.0f + 0x1.0p-8f) == 0x3F80);      // tie: to even
  CHECK(to_bf16(1.0f + 3 * 0x1.0p-8f) == 0x3F82);  // tie: to even, upwards
  CHECK(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  int bad = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = from_bf16(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    if (to_bf16(f) != h) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("narrow, widen and widen_add agree with the scalar conversions", "[half]") {
  Rng rng(7);
  std::vector<float> v(1000);
  for (auto& x : v) x = static_cast<float>(rng.normal() * 10);
  for (HalfFormat f : {HalfFormat::kFp16, HalfFormat::kBf16}) {
    std::vector<std::uint16_t> h(v.size());
    narrow(v, h, f);
    std::vector<float> back(v.size()), sum(v.size(), 1.0f);
    widen(h, back, f);
    widen_add(h, sum, f);
    for (std::size_t i = 0; i < v.size(); ++i) {
      REQUIRE(h[i] == to_half(v[i], f));
      REQUIRE(back[i] == from_half(h[i], f));
      REQUIRE(sum[i] == 1.0f + back[i]);
    }
  }
}

TEST_CASE("stochastic rounding picks a neighbouring code, by distance, unbiased", "[half]") {
  for (HalfFormat f : {HalfFormat::kFp16, HalfFormat::kBf16}) {
    // 1/3 of the way between two codes: rounds up a third of the time.
    const float lo = 1.0f, hi = from_half(static_cast<std::uint16_t>(to_half(1.0f, f) + 1), f);
    const float x = lo + (hi - lo) / 3;
    Rng rng(11);
    const int n = 30000;
    int up = 0;
    double mean = 0;
    for (int i = 0; i < n; ++i) {
      const std::uint16_t h = to_half_stochastic(x, f, rng);
      const float w = from_half(h, f);
      REQUIRE((w == lo || w == hi));
      up += w == hi;
      mean += w;
    }
    CHECK(std::abs(static_cast<double>(up) / n - 1.0 / 3) < 0.02);
    CHECK(std::abs(mean / n - x) < 0.02 * (hi - lo));
    // Exact codes stay; the array form with an rng rounds stochastically too.
    CHECK(to_half_stochastic(lo, f, rng) == to_half(lo, f));
    std::vector<float> many(n, x);
    std::vector<std::uint16_t> h(n);
    narrow(many, h, f, &rng);
    int ups = 0;
    for (auto c : h) ups += from_half(c, f) == hi;
    CHECK(std::abs(static_cast<double>(ups) / n - 1.0 / 3) < 0.02);
  }
}

TEST_CASE("stochastic rounding of arrays gives the nearest code or its neighbour across f",
          "[half]") {
  // Magnitudes from 2^-30 (fp16 subnormals and zero) to 2^17 (fp16 infinity), both signs:
  // whatever path a value takes, its code is the nearest one or the next one on f's far side.
  Rng rng(3);
  std::vector<float> v(20000);
  for (auto& x : v) {
    x = static_cast<float>(std::exp2(rng.uniform(-30, 17)) * (rng.uniform() < 0.5 ? -1 : 1));
  }
  for (HalfFormat f : {HalfFormat::kFp16, HalfFormat::kBf16}) {
    std::vector<std::uint16_t> h(v.size());
    narrow(v, h, f, &rng);
    int moved = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::uint16_t nearest = to_half(v[i], f);
      if (h[i] == nearest) continue;
      ++moved;
      const float a = from_half(nearest, f), b = from_half(h[i], f);
      INFO(v[i] << " rounded to " << b << ", nearest " << a);
      REQUIRE((h[i] == nearest + 1 || h[i] == nearest - 1));
      REQUIRE((a - v[i]) * (b - v[i]) <= 0);  // a and b on either side of v[i]
      REQUIRE(std::isfinite(b));
    }
    CHECK(moved > 1000);  // not nearest in disguise
  }
}

}  // namespace
}  // namespace murmur
