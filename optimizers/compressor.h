// Compressors for communication-efficient averaging (algorithm.compressor): a vector of floats
// becomes a byte message and back. topk and randomk keep ratio * n entries (index + value);
// qsgd quantizes each bucket of entries to s = levels levels of the bucket's norm with
// stochastic rounding (Alistarh et al. 2017); sign sends one bit per entry and the mean
// magnitude (Bernstein et al. 2018; Karimireddy et al. 2019 for its error feedback); fp16 and
// bf16 round each entry, to nearest or stochastically (algorithm.compressor.rounding).
// Stateless and thread-safe; randomized ones draw from the caller's Rng.
// ErrorFeedback adds the memory that makes a biased compressor converge.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/rng.h"

namespace murmur::optimizers {

class Compressor {
 public:
  virtual ~Compressor() = default;
  virtual std::string name() const = 0;
  // An upper bound on encode()'s output for n floats.
  virtual std::size_t max_bytes(std::size_t n) const = 0;
  // Writes the message for v into out (at least max_bytes(v.size()) bytes); returns its size.
  virtual std::size_t encode(std::span<const float> v, std::span<std::byte> out,
                             Rng& rng) const = 0;
  // out += scale * decode(message). Throws ProtocolError if the message is malformed for
  // out.size() floats.
  virtual void decode_add(std::span<const std::byte> message, float scale,
                          std::span<float> out) const = 0;
  // The factor CHOCO-SGD applies to decoded messages so that the compressor contracts,
  // E||c Q(v) - v||^2 <= (1 - delta) ||v||^2: 1 / (1 + omega) for unbiased qsgd of variance
  // omega (Koloskova et al. 2019, Sec. 3), 1 for the others.
  virtual double contraction_scale(std::size_t n) const { return 1.0; }
  // That delta for n floats, with contraction_scale applied, as Koloskova et al. list it: k / n
  // for topk and randomk, 1 / (1 + omega) for qsgd, 1 / n for sign (its worst case, a vector
  // with one nonzero entry), 1 for none, 1 - 2^-22 and 1 - 2^-16 for fp16 and bf16.
  virtual double delta(std::size_t n) const = 0;
};

// The names algorithm.compressor.name takes: none (plain float32), topk, randomk, qsgd, sign,
// fp16, bf16.
std::vector<std::string_view> compressor_names();
// Builds config.name. Throws ConfigError for a name not among compressor_names().
std::unique_ptr<Compressor> make_compressor(const CompressorConfig& config);

// Error feedback (Karimireddy et al. 2019, "Error Feedback Fixes SignSGD", Algorithm 2):
// p = v + e; send C(p); e <- p - C(p). What compression drops is sent later instead of lost.
class ErrorFeedback {
 public:
  ErrorFeedback(const Compressor& compressor, std::size_t n) : compressor_(compressor), e_(n) {}
  // Encodes v plus the carried error into out; returns the message size.
  std::size_t encode(std::span<const float> v, std::span<std::byte> out, Rng& rng);
  std::span<float> error() { return e_; }

 private:
  const Compressor& compressor_;
  std::vector<float> e_;
};

}  // namespace murmur::optimizers
