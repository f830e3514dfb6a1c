#include "optimizers/compressor.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "core/half.h"
#include "core/name_table.h"
#include "core/names.h"

namespace murmur::optimizers {

namespace {

template <class T>
void put(std::span<std::byte> out, std::size_t at, T v) {
  std::memcpy(out.data() + at, &v, sizeof v);
}
template <class T>
T get(std::span<const std::byte> in, std::size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

[[noreturn]] void malformed(const std::string& name, std::size_t bytes, std::size_t n) {
  throw ProtocolError(fmt::format(
      "{} compressor: a message of {} bytes does not decode to {} floats", name, bytes, n));
}

class NoneCompressor final : public Compressor {
 public:
  std::string name() const override { return "none"; }
  std::size_t max_bytes(std::size_t n) const override { return n * 4; }
  double delta(std::size_t) const override { return 1.0; }
  std::size_t encode(std::span<const float> v, std::span<std::byte> out, Rng&) const override {
    std::memcpy(out.data(), v.data(), v.size_bytes());
    return v.size_bytes();
  }
  void decode_add(std::span<const std::byte> m, float scale, std::span<float> out) const override {
    if (m.size() != out.size() * 4) malformed(name(), m.size(), out.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] += scale * get<float>(m, 4 * i);
  }
};

// Sparse message: u32 count, then count (u32 index, f32 value) pairs.
class SparseCompressor final : public Compressor {
 public:
  SparseCompressor(bool top, double ratio) : top_(top), ratio_(ratio) {}
  std::string name() const override { return top_ ? "topk" : "randomk"; }
  std::size_t keep(std::size_t n) const {
    return std::min(n, std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(ratio_ * n))));
  }
  std::size_t max_bytes(std::size_t n) const override { return 4 + 8 * keep(n); }
  double delta(std::size_t n) const override {
    return n == 0 ? 1.0 : static_cast<double>(keep(n)) / static_cast<double>(n);
  }
  std::size_t encode(std::span<const float> v, std::span<std::byte> out, Rng& rng) const override {
    const std::size_t n = v.size(), k = keep(n);
    std::vector<std::uint32_t> idx;
    if (top_) {
      // The k largest magnitudes; ties broken by index so every run picks the same ones.
      idx.resize(n);
      std::iota(idx.begin(), idx.end(), 0u);
      auto larger = [&](std::uint32_t a, std::uint32_t b) {
        const float x = std::fabs(v[a]), y = std::fabs(v[b]);
        return x > y || (x == y && a < b);
      };
      std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(), larger);
      idx.resize(k);
    } else {
      // k distinct indices by Floyd's algorithm: O(k) draws, no O(n) shuffle.
      for (std::size_t j = n - k; j < n; ++j) {
        auto t = static_cast<std::uint32_t>(rng.below(j + 1));
        if (std::find(idx.begin(), idx.end(), t) != idx.end()) t = static_cast<std::uint32_t>(j);
        idx.push_back(t);
      }
    }
    std::sort(idx.begin(), idx.end());
    put<std::uint32_t>(out, 0, static_cast<std::uint32_t>(k));
    for (std::size_t j = 0; j < k; ++j) {
      put<std::uint32_t>(out, 4 + 8 * j, idx[j]);
      put<float>(out, 8 + 8 * j, v[idx[j]]);
    }
    return 4 + 8 * k;
  }
  void decode_add(std::span<const std::byte> m, float scale, std::span<float> out) const override {
    if (m.size() < 4) malformed(name(), m.size(), out.size());
    const auto k = get<std::uint32_t>(m, 0);
    if (m.size() != 4 + 8 * std::size_t{k}) malformed(name(), m.size(), out.size());
    for (std::size_t j = 0; j < k; ++j) {
      const auto i = get<std::uint32_t>(m, 4 + 8 * j);
      if (i >= out.size()) malformed(name(), m.size(), out.size());
      out[i] += scale * get<float>(m, 8 + 8 * j);
    }
  }

 private:
  bool top_;
  double ratio_;
};

// QSGD (Alistarh et al. 2017, eq. (4)): Q(v)_i = ||v||_2 sign(v_i) xi_i / s with xi_i = l or
// l + 1 for l = floor(s |v_i| / ||v||), rounded up with probability s |v_i| / ||v|| - l, so
// E Q(v) = v. Applied to each bucket of b entries against its own norm, as the paper's
// experiments do: the variance bound of their Lemma 3.1, omega = min(b / s^2, sqrt(b) / s),
// then holds with b in place of the vector's length. Quantizing a whole model at once (b = n)
// makes omega grow with the model: 45.7 for the MLP's 535818 floats at s = 16, against 1.41
// for b = 512, and CHOCO at gamma 0.2 diverged on it (experiments/results/compression).
// Message: one f32 norm per bucket, then one signed level per entry in 1, 2 or 4 bytes.
class QsgdCompressor final : public Compressor {
 public:
  QsgdCompressor(int levels, int bucket)
      : s_(levels),
        bucket_(static_cast<std::size_t>(bucket)),
        width_(levels < 128     ? 1
               : levels < 32768 ? 2
                                : 4) {}
  std::string name() const override { return "qsgd"; }
  std::size_t bucket(std::size_t n) const {
    return bucket_ == 0 ? std::max<std::size_t>(n, 1) : bucket_;
  }
  std::size_t buckets(std::size_t n) const { return (n + bucket(n) - 1) / bucket(n); }
  std::size_t max_bytes(std::size_t n) const override { return 4 * buckets(n) + width_ * n; }
  double contraction_scale(std::size_t n) const override {
    const double b = static_cast<double>(std::min(bucket(n), n)), s = s_;
    return 1.0 / (1.0 + std::min(b / (s * s), std::sqrt(b) / s));
  }
  double delta(std::size_t n) const override { return contraction_scale(n); }
  std::size_t encode(std::span<const float> v, std::span<std::byte> out, Rng& rng) const override {
    const std::size_t n = v.size(), b = bucket(n), nb = buckets(n), levels_at = 4 * nb;
    for (std::size_t k = 0; k < nb; ++k) {
      const std::span<const float> part = v.subspan(k * b, std::min(b, n - k * b));
      double sq = 0;
      for (float x : part) sq += static_cast<double>(x) * x;
      const float norm = static_cast<float>(std::sqrt(sq));
      put<float>(out, 4 * k, norm);
      for (std::size_t j = 0; j < part.size(); ++j) {
        std::int32_t level = 0;
        if (norm > 0) {
          const double r = s_ * std::fabs(static_cast<double>(part[j])) / norm;
          const double l = std::floor(r);
          level = static_cast<std::int32_t>(l) + (rng.uniform() < r - l ? 1 : 0);
          level = std::min(level, s_);
          if (part[j] < 0) level = -level;
        }
        const std::size_t at = levels_at + width_ * (k * b + j);
        if (width_ == 1)
          put<std::int8_t>(out, at, static_cast<std::int8_t>(level));
        else if (width_ == 2)
          put<std::int16_t>(out, at, static_cast<std::int16_t>(level));
        else
          put<std::int32_t>(out, at, level);
      }
    }
    return max_bytes(n);
  }
  void decode_add(std::span<const std::byte> m, float scale, std::span<float> out) const override {
    const std::size_t n = out.size(), b = bucket(n), nb = buckets(n), levels_at = 4 * nb;
    if (m.size() != max_bytes(n)) malformed(name(), m.size(), n);
    for (std::size_t k = 0; k < nb; ++k) {
      const float unit = scale * get<float>(m, 4 * k) / static_cast<float>(s_);
      for (std::size_t i = k * b; i < std::min(n, (k + 1) * b); ++i) {
        const std::size_t at = levels_at + width_ * i;
        const std::int32_t level = width_ == 1   ? get<std::int8_t>(m, at)
                                   : width_ == 2 ? get<std::int16_t>(m, at)
                                                 : get<std::int32_t>(m, at);
        out[i] += unit * static_cast<float>(level);
      }
    }
  }

 private:
  int s_;
  std::size_t bucket_;  // 0: the whole vector
  std::size_t width_;
};

// Scaled sign (Karimireddy et al. 2019, Algorithm 1: C(v) = ||v||_1 / d * sign(v)): f32 scale,
// then one bit per entry (1 = negative), LSB first.
class SignCompressor final : public Compressor {
 public:
  std::string name() const override { return "sign"; }
  std::size_t max_bytes(std::size_t n) const override { return 4 + (n + 7) / 8; }
  double delta(std::size_t n) const override {
    return 1.0 / static_cast<double>(std::max<std::size_t>(n, 1));
  }
  std::size_t encode(std::span<const float> v, std::span<std::byte> out, Rng&) const override {
    double l1 = 0;
    for (float x : v) l1 += std::fabs(x);
    put<float>(out, 0, v.empty() ? 0.0f : static_cast<float>(l1 / v.size()));
    std::memset(out.data() + 4, 0, (v.size() + 7) / 8);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (std::signbit(v[i])) out[4 + i / 8] |= std::byte{1} << (i % 8);
    }
    return max_bytes(v.size());
  }
  void decode_add(std::span<const std::byte> m, float scale, std::span<float> out) const override {
    if (m.size() != max_bytes(out.size())) malformed(name(), m.size(), out.size());
    const float a = scale * get<float>(m, 0);
    for (std::size_t i = 0; i < out.size(); ++i) {
      const bool neg = std::to_integer<int>(m[4 + i / 8] >> (i % 8)) & 1;
      out[i] += neg ? -a : a;
    }
  }
};

// fp16 or bf16 per entry (core/half.h), to nearest or stochastically.
class HalfCompressor final : public Compressor {
 public:
  HalfCompressor(bool bf16, bool stochastic)
      : format_(bf16 ? HalfFormat::kBf16 : HalfFormat::kFp16), stochastic_(stochastic) {}
  std::string name() const override { return format_ == HalfFormat::kBf16 ? "bf16" : "fp16"; }
  std::size_t max_bytes(std::size_t n) const override { return 2 * n; }
  double delta(std::size_t) const override {
    return format_ == HalfFormat::kBf16 ? 1.0 - 0x1p-16 : 1.0 - 0x1p-22;
  }
  std::size_t encode(std::span<const float> v, std::span<std::byte> out, Rng& rng) const override {
    for (std::size_t i = 0; i < v.size(); ++i) {
      put<std::uint16_t>(out, 2 * i, stochastic_ ? to_half_stochastic(v[i], format_, rng)
                                                 : to_half(v[i], format_));
    }
    return 2 * v.size();
  }
  void decode_add(std::span<const std::byte> m, float scale, std::span<float> out) const override {
    if (m.size() != 2 * out.size()) malformed(name(), m.size(), out.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i] += scale * from_half(get<std::uint16_t>(m, 2 * i), format_);
    }
  }

 private:
  HalfFormat format_;
  bool stochastic_;
};

}  // namespace

namespace {
// algorithm.compressor.rounding, for fp16 and bf16.
[[maybe_unused]] const bool kRoundingsRegistered =
    register_names("algorithm.compressor.rounding", {"nearest", "stochastic"});
bool stochastic(const CompressorConfig& c) { return c.rounding == "stochastic"; }

// The compressors, one row each: what algorithm.compressor.name takes.
struct CompressorEntry {
  std::string_view name;
  std::unique_ptr<Compressor> (*make)(const CompressorConfig&);
};
const CompressorEntry kCompressors[] = {
    {"none", [](const CompressorConfig&) -> std::unique_ptr<Compressor> { return std::make_unique<NoneCompressor>(); }},
    {"topk", [](const CompressorConfig& c) -> std::unique_ptr<Compressor> { return std::make_unique<SparseCompressor>(true, c.ratio); }},
    {"randomk", [](const CompressorConfig& c) -> std::unique_ptr<Compressor> { return std::make_unique<SparseCompressor>(false, c.ratio); }},
    {"qsgd", [](const CompressorConfig& c) -> std::unique_ptr<Compressor> { return std::make_unique<QsgdCompressor>(c.levels, c.bucket); }},
    {"sign", [](const CompressorConfig&) -> std::unique_ptr<Compressor> { return std::make_unique<SignCompressor>(); }},
    {"fp16", [](const CompressorConfig& c) -> std::unique_ptr<Compressor> { return std::make_unique<HalfCompressor>(false, stochastic(c)); }},
    {"bf16", [](const CompressorConfig& c) -> std::unique_ptr<Compressor> { return std::make_unique<HalfCompressor>(true, stochastic(c)); }},
};
[[maybe_unused]] const bool kRegistered = register_names("algorithm.compressor.name", compressor_names());
}  // namespace

std::vector<std::string_view> compressor_names() {
  return names_of(std::span<const CompressorEntry>(kCompressors));
}

std::unique_ptr<Compressor> make_compressor(const CompressorConfig& c) {
  return find_named(std::span<const CompressorEntry>(kCompressors), c.name,
                    "algorithm.compressor.name", "compressor").make(c);
}

std::size_t ErrorFeedback::encode(std::span<const float> v, std::span<std::byte> out, Rng& rng) {
  for (std::size_t i = 0; i < e_.size(); ++i) e_[i] += v[i];
  const std::size_t bytes = compressor_.encode(e_, out, rng);
  compressor_.decode_add(out.first(bytes), -1.0f, e_);
  return bytes;
}

}  // namespace murmur::optimizers
