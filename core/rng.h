// A small, seeded, portable random number generator (xoshiro256** seeded by splitmix64).
// Unlike std::mt19937 + std:: distributions, every draw is defined here, so the same seed gives
// the same run bit for bit on any CPU and standard library. Not thread-safe: one per thread/stream.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace murmur {

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) { reseed(seed); }

  // Derives an independent stream, e.g. Rng(seed).fork(rank) or .fork(layer_index).
  Rng fork(std::uint64_t stream) const {
    std::uint64_t x = s_[0] ^ (stream * 0x9E3779B97F4A7C15ull) ^ 0xD1B54A32D192ED03ull;
    return Rng(splitmix64(x) ^ s_[3]);
  }

  void reseed(std::uint64_t seed) {
    std::uint64_t x = seed;
    for (auto& s : s_) s = splitmix64(x);
  }

  std::uint64_t next_u64() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; bias < 2^-64 * n, negligible).
  std::uint64_t below(std::uint64_t n) {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next_u64()) * n) >> 64);
  }
  // Standard normal by Box-Muller (no cached second value, so the state is just s_).
  double normal() {
    double u1 = uniform();
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
  double normal(double mean, double stddev) { return mean + stddev * normal(); }

  // The full state, for checkpoints and resume.
  struct State {
    std::uint64_t s[4];
  };
  State state() const { return {{s_[0], s_[1], s_[2], s_[3]}}; }
  void set_state(const State& st) {
    for (int i = 0; i < 4; ++i) s_[i] = st.s[i];
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix64(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint64_t s_[4];
};

}  // namespace murmur
