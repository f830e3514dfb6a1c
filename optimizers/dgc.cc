#include "optimizers/dgc.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "core/error.h"
#include "core/names.h"
#include "core/rng.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kSparsifiers[] = {"none", "dgc"};
[[maybe_unused]] const bool kRegistered =
    register_names("algorithm.sparsify.name", {std::begin(kSparsifiers), std::end(kSparsifiers)});
constexpr std::size_t kMargin = 3;  // the sampled threshold aims at 3k candidates
constexpr int kWarmupStages = 4;  // 1/4, 1/16, 1/64, 1/256: the paper's 75% .. 99.6% sparsity
}  // namespace

DeepGradientCompression::DeepGradientCompression(const SparsifyConfig& config,
                                                 const OptimizerConfig& optimizer, int peers,
                                                 std::size_t size)
    : config_(config),
      momentum_(optimizer.momentum),
      weight_decay_(optimizer.weight_decay),
      clip_(config.clip_norm / std::sqrt(static_cast<double>(std::max(peers, 1)))),
      u_(size),
      v_(size),
      magnitude_(size) {}

double DeepGradientCompression::density(std::int64_t step) const {
  if (step > config_.warmup_steps || config_.warmup_steps == 0) return config_.density;
  const std::int64_t stage = (step - 1) * kWarmupStages / config_.warmup_steps;  // 0..3
  return std::max(config_.density, std::pow(0.25, static_cast<double>(stage + 1)));
}

std::size_t DeepGradientCompression::count(std::int64_t step) const {
  const auto k = static_cast<std::size_t>(std::llround(density(step) * static_cast<double>(u_.size())));
  return std::clamp<std::size_t>(k, 1, u_.size());
}

void DeepGradientCompression::compress(std::int64_t step, std::span<const float> grads,
                                       std::span<const float> params,
                                       std::vector<std::uint32_t>& index,
                                       std::vector<float>& value) {
  const std::size_t n = u_.size();
  if (grads.size() != n || params.size() != n) {
    throw Error(fmt::format("dgc: {} gradients and {} parameters for accumulators of {}",
                            grads.size(), params.size(), n));
  }
  double squared = 0;
  for (float g : grads) squared += static_cast<double>(g) * g;
  last_norm_ = std::sqrt(squared);
  const float clip =
      clip_ > 0 && last_norm_ > clip_ ? static_cast<float>(clip_ / last_norm_) : 1.0f;
  const auto m = static_cast<float>(momentum_), wd = static_cast<float>(weight_decay_);
  for (std::size_t i = 0; i < n; ++i) {
    const float g = clip * grads[i] + wd * params[i];
    u_[i] = m * u_[i] + g;  // momentum correction
    v_[i] += u_[i];
    // A NaN (a diverged run) is never chosen, and must not reach nth_element's ordering.
    magnitude_[i] = std::isnan(v_[i]) ? 0.0f : std::fabs(v_[i]);
  }
  const std::size_t k = count(step);
  const float threshold = n >= kSampleFrom ? sampled_threshold(step, k) : exact_threshold(k);
  // Entries above the threshold are sent, and ties at it while fewer than k are.
  std::size_t above = 0;
  for (float a : v_) above += std::fabs(a) > threshold;
  std::size_t ties = k - std::min(k, above);
  index.clear();
  value.clear();
  for (std::size_t i = 0; i < n; ++i) {
    const float a = std::fabs(v_[i]);
    if (a == 0.0f || !(a > threshold || (a == threshold && ties > 0))) continue;
    if (a == threshold) --ties;
    index.push_back(static_cast<std::uint32_t>(i));
    value.push_back(v_[i]);
    v_[i] = 0.0f;
    u_[i] = 0.0f;  // momentum factor masking
  }
}

float DeepGradientCompression::exact_threshold(std::size_t k) {
  // The k-th largest magnitude, by a selection over all of them.
  std::nth_element(magnitude_.begin(), magnitude_.begin() + static_cast<std::ptrdiff_t>(k - 1),
                   magnitude_.end(), std::greater<>());
  return magnitude_[k - 1];
}

float DeepGradientCompression::sampled_threshold(std::int64_t step, std::size_t k) {
  // Lin et al.'s sampling: the threshold that keeps the top 3k/n of a random 1% of the entries
  // keeps about 3k of them all (the margin: an estimate from a few dozen sampled values is
  // noisy, and one that kept fewer than k would send fewer). The exact k-th largest among
  // those it keeps (a selection over about 3k, not n) is then the threshold; where it kept
  // fewer than k, those are sent.
  const std::size_t n = magnitude_.size();
  const std::size_t samples = std::max<std::size_t>(n / 100, kMinSamples);
  Rng rng = Rng(0x44474321).fork(static_cast<std::uint64_t>(step));  // the same on a resume
  sample_.resize(samples);
  for (float& x : sample_) x = magnitude_[rng.below(n)];
  const std::size_t top = std::clamp<std::size_t>(
      (kMargin * k * samples + n - 1) / n, 1, samples);  // ceil(samples 3k / n)
  std::nth_element(sample_.begin(), sample_.begin() + static_cast<std::ptrdiff_t>(top - 1),
                   sample_.end(), std::greater<>());
  const float estimate = sample_[top - 1];
  sample_.clear();
  for (float a : magnitude_) {
    if (a >= estimate && a > 0.0f) sample_.push_back(a);
  }
  if (sample_.size() <= k) return estimate;
  std::nth_element(sample_.begin(), sample_.begin() + static_cast<std::ptrdiff_t>(k - 1),
                   sample_.end(), std::greater<>());
  return sample_[k - 1];
}

OptimizerConfig local_optimizer_config(const OptimizerConfig& optimizer,
                                       const AlgorithmConfig& algorithm, int world_size) {
  OptimizerConfig local = optimizer;
  if (algorithm.sparsify.name == "dgc" && world_size > 1) {
    local.momentum = 0;
    local.weight_decay = 0;
  }
  return local;
}

void check_sparsify(const AlgorithmConfig& a, const OptimizerConfig& optimizer,
                    bool host_memory) {
  if (a.sparsify.name != "dgc") return;
  // The algorithm and average = gradients are check_algorithm's (algorithms.cc), at config time.
  if (a.overlap) {
    throw ConfigError("algorithm.overlap: not with algorithm.sparsify dgc (its top-k is taken over "
                      "the whole gradient, after backward)");
  }
  if (optimizer.name != "sgd") {
    throw ConfigError(fmt::format("train.optimizer.name: {} with algorithm.sparsify dgc, whose "
                                  "momentum correction is SGD's momentum; use sgd", optimizer.name));
  }
  if (optimizer.nesterov) {
    throw ConfigError("train.optimizer.nesterov: not with algorithm.sparsify dgc (its momentum "
                      "correction accumulates heavy-ball momentum)");
  }
  if (!host_memory) {
    throw ConfigError("algorithm.sparsify: dgc runs on host memory; this peer trains on a GPU");
  }
}

}  // namespace murmur::optimizers
