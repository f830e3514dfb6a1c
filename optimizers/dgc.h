// Deep Gradient Compression (Lin, Han, Mao, Wang and Dally 2018), the sender's side: each step a
// peer folds its gradient into two accumulators and sends only the largest `density` of them,
// (index, value) pairs, through the sparse allreduce; the rest waits, and is sent once it has
// grown large enough. The paper's four devices:
// - momentum correction: u <- m u + g, v <- v + u; the top entries of v are sent, so what is
//   delayed is the momentum-corrected update, not the raw gradient. The local optimizer then
//   runs with no momentum (and no weight decay: the decay enters g here, wd w, as the paper's
//   code does);
// - local gradient clipping: g is scaled to norm clip_norm / sqrt(peers) before it is folded in
//   (the global norm of the sum of the peers' gradients is then at most clip_norm);
// - momentum factor masking: the entries sent are zeroed in u as well as in v, so that stale
//   momentum does not push them again;
// - warm-up: the density falls exponentially, 25%, 6.25%, 1.5625%, 0.390625%, over the four
//   quarters of warmup_steps, then stays at `density`.
// The threshold is the exact k-th largest magnitude below kSampleFrom floats; from there on it
// is estimated from a random 1% of them, as the paper does (an exact selection over all n
// floats cost more than the exchange), and a step may, rarely, send fewer than k.
// Host memory only (check_sparsify refuses a GPU peer). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/config.h"

namespace murmur::optimizers {

class DeepGradientCompression {
 public:
  // Over `size` floats, for `peers` peers; momentum and weight decay from `optimizer`.
  DeepGradientCompression(const SparsifyConfig& config, const OptimizerConfig& optimizer,
                          int peers, std::size_t size);

  // The fraction of the gradient sent at step `step` (1, 2, ...).
  double density(std::int64_t step) const;
  // The entries step `step` sends: max(1, round(density * size)) of them (fewer where fewer of
  // the accumulated values are nonzero, or where the sampled threshold keeps fewer).
  std::size_t count(std::int64_t step) const;

  // Folds `grads` (this peer's gradient) and the decay of `params` into the accumulators, and
  // writes the entries to send into index (ascending) and value; zeroes them in both
  // accumulators. Throws Error for spans of another size.
  void compress(std::int64_t step, std::span<const float> grads, std::span<const float> params,
                std::vector<std::uint32_t>& index, std::vector<float>& value);

  // The accumulators, for checkpoints (restored in place) and tests.
  std::span<float> momentum() { return u_; }
  std::span<float> residual() { return v_; }
  // The norm of the last gradient before clipping (0 before the first compress()).
  double last_grad_norm() const { return last_norm_; }

  // From this many floats on, the threshold is estimated from a sample.
  static constexpr std::size_t kSampleFrom = 65536;
  static constexpr std::size_t kMinSamples = 1024;

 private:
  float exact_threshold(std::size_t k);
  float sampled_threshold(std::int64_t step, std::size_t k);

  SparsifyConfig config_;
  double momentum_, weight_decay_, clip_;
  std::vector<float> u_, v_;
  std::vector<float> magnitude_;  // scratch for the selection
  std::vector<float> sample_;     // the sampled magnitudes, then those above their threshold
  double last_norm_ = 0;
};

// The optimizer settings the local optimizer runs with: `optimizer` as given, or, under DGC,
// with more than one peer, without momentum and weight decay (DGC applies both before it
// sends; a single peer averages nothing and keeps them).
OptimizerConfig local_optimizer_config(const OptimizerConfig& optimizer,
                                       const AlgorithmConfig& algorithm, int world_size);

// Throws ConfigError, naming the key, for algorithm.sparsify settings that cannot run beside
// the rest of the config: DGC needs no overlap, sgd without Nesterov, host memory. (That it
// needs allreduce with average = gradients, check_algorithm checks, at config time.)
void check_sparsify(const AlgorithmConfig& algorithm, const OptimizerConfig& optimizer,
                    bool host_memory);

}  // namespace murmur::optimizers
