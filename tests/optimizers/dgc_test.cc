// Deep Gradient Compression's arithmetic (momentum correction, momentum factor masking, local
// clipping, the density warm-up, decay folded into the gradient, nothing lost), the config
// combinations it refuses, and allreduce with algorithm.sparsify dgc over inproc ranks: every
// rank ends with the mean of every rank's selection, through the sparse allreduce.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>

#include "core/error.h"
#include "core/rng.h"
#include "optimizers/algorithm.h"
#include "optimizers/allreduce.h"
#include "optimizers/device_arrays.h"
#include "optimizers/dgc.h"
#include "tests/optimizers/consensus_util.h"
#include "tests/transport/backends.h"

namespace murmur::optimizers::testing {
namespace {

namespace tt = transport::testing;

SparsifyConfig dgc(double density, std::int64_t warmup = 0, double clip = 0) {
  SparsifyConfig c;
  c.name = "dgc";
  c.density = density;
  c.warmup_steps = warmup;
  c.clip_norm = clip;
  return c;
}

OptimizerConfig sgd(double momentum, double wd = 0) {
  OptimizerConfig o;
  o.momentum = momentum;
  o.weight_decay = wd;
  return o;
}

}  // namespace

TEST_CASE("dgc's density falls 4x per quarter of the warm-up, then stays", "[dgc]") {
  DeepGradientCompression c(dgc(0.001, 8), sgd(0.9), 4, 100000);
  CHECK(c.density(1) == 0.25);
  CHECK(c.density(2) == 0.25);
  CHECK(c.density(3) == 0.0625);
  CHECK(c.density(5) == 0.25 * 0.25 * 0.25);
  CHECK(c.density(8) == 0.25 * 0.25 * 0.25 * 0.25);
  CHECK(c.density(9) == 0.001);
  CHECK(c.count(1) == 25000);
  CHECK(c.count(9) == 100);
  DeepGradientCompression none(dgc(0.001), sgd(0.9), 4, 10);
  CHECK(none.density(1) == 0.001);
  CHECK(none.count(1) == 1);  // at least one entry
}

TEST_CASE("dgc sends the top of the momentum-corrected accumulation and masks it", "[dgc]") {
  // m = 0.5, k = 2 of 5. Step 1: u = v = g; the two largest |v| go, and are zeroed in u and v.
  DeepGradientCompression c(dgc(0.4), sgd(0.5), 1, 5);
  const std::vector<float> params(5, 0.0f);
  const std::vector<float> g{1.0f, -4.0f, 0.5f, 3.0f, -0.25f};
  std::vector<std::uint32_t> index;
  std::vector<float> value;
  c.compress(1, g, params, index, value);
  CHECK(index == std::vector<std::uint32_t>{1, 3});
  CHECK(value == std::vector<float>{-4.0f, 3.0f});
  CHECK(std::vector<float>(c.residual().begin(), c.residual().end()) ==
        std::vector<float>{1.0f, 0.0f, 0.5f, 0.0f, -0.25f});
  CHECK(std::vector<float>(c.momentum().begin(), c.momentum().end()) ==
        std::vector<float>{1.0f, 0.0f, 0.5f, 0.0f, -0.25f});
  // Step 2, same g: u = 0.5 u + g = {1.5, -4, 0.75, 3, -0.375}; v += u = {2.5, -4, 1.25, 3, -0.625}.
  c.compress(2, g, params, index, value);
  CHECK(index == std::vector<std::uint32_t>{1, 3});
  CHECK(value == std::vector<float>{-4.0f, 3.0f});
  CHECK(std::vector<float>(c.residual().begin(), c.residual().end()) ==
        std::vector<float>{2.5f, 0.0f, 1.25f, 0.0f, -0.625f});
  // Step 3, g = 0: u = {0.75, 0, 0.375, 0, -0.1875}; v = {3.25, 0, 1.625, 0, -0.8125}: the
  // delayed entries 0 and 2 go now.
  const std::vector<float> zero(5, 0.0f);
  c.compress(3, zero, params, index, value);
  CHECK(index == std::vector<std::uint32_t>{0, 2});
  CHECK(value == std::vector<float>{3.25f, 1.625f});
  CHECK(c.momentum()[4] == -0.1875f);
}

TEST_CASE("dgc's sampled threshold sends the largest entries, about k of them", "[dgc]") {
  // From kSampleFrom floats on the threshold comes from a 1% sample: whatever it keeps must be
  // the largest entries (none left behind is larger than one sent), and k of them, or close.
  constexpr std::size_t n = 1 << 20;
  REQUIRE(n >= DeepGradientCompression::kSampleFrom);
  DeepGradientCompression c(dgc(0.001), sgd(0.0), 1, n);
  const std::vector<float> params(n, 0.0f);
  std::vector<float> g(n);
  Rng rng(5);
  std::vector<std::uint32_t> index;
  std::vector<float> value;
  for (int t = 1; t <= 3; ++t) {
    for (float& x : g) x = static_cast<float>(rng.normal());
    c.compress(t, g, params, index, value);
    const std::size_t k = c.count(t);
    REQUIRE(k == 1049);
    CHECK(index.size() <= k);
    CHECK(index.size() >= k * 9 / 10);
    float smallest_sent = std::numeric_limits<float>::max(), largest_left = 0;
    for (float v : value) smallest_sent = std::min(smallest_sent, std::fabs(v));
    for (float v : c.residual()) largest_left = std::max(largest_left, std::fabs(v));
    CHECK(largest_left <= smallest_sent);
  }
}

TEST_CASE("dgc without momentum loses nothing: what is sent plus what waits is the sum", "[dgc]") {
  constexpr std::size_t n = 1000;
  DeepGradientCompression c(dgc(0.01), sgd(0.0), 1, n);
  const std::vector<float> params(n, 0.0f);
  std::vector<double> sent(n, 0.0), total(n, 0.0);
  std::vector<float> g(n);
  std::vector<std::uint32_t> index;
  std::vector<float> value;
  for (int t = 1; t <= 50; ++t) {
    for (std::size_t i = 0; i < n; ++i) {
      g[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i * t + i)) / 8.0);
      total[i] += g[i];
    }
    c.compress(t, g, params, index, value);
    REQUIRE(index.size() == 10);
    REQUIRE(std::is_sorted(index.begin(), index.end()));
    for (std::size_t j = 0; j < index.size(); ++j) sent[index[j]] += value[j];
  }
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(sent[i] + c.residual()[i] == Approx(total[i]).margin(1e-4));
  }
}

TEST_CASE("dgc clips the local gradient at clip_norm / sqrt(peers) and folds in the decay",
          "[dgc]") {
  // 4 peers, clip_norm 1: the local bound is 0.5. g = (3, 4), norm 5: scaled by 0.1.
  DeepGradientCompression c(dgc(1.0, 0, 1.0), sgd(0.0, 0.5), 4, 2);
  const std::vector<float> params{2.0f, -2.0f};
  std::vector<std::uint32_t> index;
  std::vector<float> value;
  c.compress(1, std::vector<float>{3.0f, 4.0f}, params, index, value);
  CHECK(c.last_grad_norm() == Approx(5.0));
  REQUIRE(value.size() == 2);
  CHECK(value[0] == Approx(0.3 + 0.5 * 2.0));
  CHECK(value[1] == Approx(0.4 - 0.5 * 2.0));
  // Below the bound: untouched.
  c.compress(2, std::vector<float>{0.3f, 0.0f}, params, index, value);
  CHECK(value[0] == Approx(0.3 + 1.0));
}

TEST_CASE("dgc takes the optimizer's momentum and decay, and refuses what it cannot run",
          "[dgc]") {
  AlgorithmConfig a;
  a.name = "allreduce";
  a.average = "gradients";
  a.sparsify = dgc(0.001);
  const OptimizerConfig local = local_optimizer_config(sgd(0.9, 1e-4), a, 4);
  CHECK(local.momentum == 0.0);
  CHECK(local.weight_decay == 0.0);
  CHECK(local_optimizer_config(sgd(0.9, 1e-4), a, 1).momentum == 0.9);  // nothing to average
  CHECK_NOTHROW(check_sparsify(a, sgd(0.9), true));
  auto refused = [&](AlgorithmConfig alg, OptimizerConfig opt, bool host, const char* expect) {
    try {
      check_sparsify(alg, opt, host);
    } catch (const ConfigError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(expect) != std::string::npos);
      return;
    }
    FAIL("not refused: " << expect);
  };
  AlgorithmConfig overlap = a;
  overlap.overlap = true;
  refused(overlap, sgd(0.9), true, "algorithm.overlap");
  OptimizerConfig adamw = sgd(0.9);
  adamw.name = "adamw";
  refused(a, adamw, true, "train.optimizer.name: adamw");
  OptimizerConfig nesterov = sgd(0.9);
  nesterov.nesterov = true;
  refused(a, nesterov, true, "train.optimizer.nesterov");
  refused(a, sgd(0.9), false, "GPU");
  // At config time, before any peer starts: another algorithm, or allreduce of parameters,
  // refuses it, not just warns.
  AlgorithmConfig gossip = a;
  gossip.name = "dpsgd";
  gossip.average = "params";
  AlgorithmConfig params = a;
  params.average = "params";
  for (const AlgorithmConfig& wrong : {gossip, params}) {
    try {
      check_algorithm(wrong, TopologyConfig{}, 4, 1);
      FAIL("sparsify dgc was not refused with " << wrong.name << " averaging " << wrong.average);
    } catch (const ConfigError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find("algorithm.sparsify.name: dgc") != std::string::npos);
      CHECK(std::string(e.what()).find("algorithm.average: gradients") != std::string::npos);
    }
  }
  CHECK_NOTHROW(check_algorithm(a, TopologyConfig{}, 4, 1));
}

TEST_CASE("allreduce with dgc gives every rank the mean of every rank's selection",
          "[algorithms][gradients][dgc]") {
  // 3 ranks (one folds into the sparse allreduce's doubling) and 4; 1% of 20000 floats over
  // 8 steps after a warm-up of 8 (25%, 6.25%, 1.5625%, then 1%): at 25% the merge of the ranks'
  // selections fills half the vector and goes dense, later it stays sparse.
  auto ranks = GENERATE(3, 4);
  CAPTURE(ranks);
  constexpr std::size_t d = 20000;
  constexpr int kSteps = 10;
  AlgorithmConfig alg = algorithm("allreduce");
  alg.average = "gradients";
  alg.sparsify = dgc(0.01, 8);
  auto gradient = [](int r, int t, std::size_t i) {
    return static_cast<float>(std::sin(0.001 * static_cast<double>((i + 1) * (r + 2) + 7 * t)));
  };
  std::mutex mu;
  std::int64_t dense_steps = -1;
  auto results = tt::run_ranks("inproc", ranks, [&](tt::RankContext& ctx) {
    std::vector<float> params(d, 0.0f), grads(d, 0.0f);
    TransportConfig tc;
    tc.recv_timeout_ms = 20000;
    auto built = build_averaging(ctx.transport(), device::cpu(), alg, graph("ring"), tc, params, 7);
    auto region = register_array(ctx.transport(), device::cpu(), grads);
    Averaging& a = *built.averaging;
    a.attach_gradients(grads, *region);
    auto& allreduce = dynamic_cast<AllreduceAveraging&>(a);
    MURMUR_CHECK(allreduce.dgc() != nullptr);
    MURMUR_CHECK(a.state().size() == 2);
    // Every rank's compressor, replayed here, gives the expected mean.
    std::vector<DeepGradientCompression> replicas;
    for (int q = 0; q < ranks; ++q) replicas.emplace_back(alg.sparsify, OptimizerConfig{}, ranks, d);
    std::vector<float> g(d);
    std::vector<std::uint32_t> index;
    std::vector<float> value;
    std::int64_t my_pairs = 0, dense = 0;
    for (int t = 1; t <= kSteps; ++t) {
      for (std::size_t i = 0; i < d; ++i) grads[i] = gradient(ctx.rank(), t, i);
      std::vector<double> mean(d, 0.0);
      std::vector<bool> chosen(d, false);
      for (int q = 0; q < ranks; ++q) {
        for (std::size_t i = 0; i < d; ++i) g[i] = gradient(q, t, i);
        replicas[static_cast<std::size_t>(q)].compress(t, g, params, index, value);
        for (std::size_t j = 0; j < index.size(); ++j) {
          mean[index[j]] += value[j] / ranks;
          chosen[index[j]] = true;
        }
        if (q == ctx.rank()) my_pairs += static_cast<std::int64_t>(index.size());
      }
      // The sparse allreduce goes dense iff the union of the selections fills half the vector.
      dense += std::count(chosen.begin(), chosen.end(), true) >
               static_cast<std::ptrdiff_t>(transport::SparseAllreduce::max_sparse_pairs(d));
      a.average_gradients(t);
      for (std::size_t i = 0; i < d; ++i) {
        if (std::fabs(grads[i] - mean[i]) > 1e-5) {
          MURMUR_CHECK(fmt::format("step {} float {}: {} against {}", t, i, grads[i], mean[i]) == "");
          break;
        }
      }
    }
    MURMUR_CHECK(allreduce.sparse_went_dense() == dense);
    MURMUR_CHECK(allreduce.sparse_pairs_sent() == my_pairs);
    // 2 steps of 5000, 2 of 1250, 2 of 313, 4 of 200.
    MURMUR_CHECK(my_pairs == 2 * 5000 + 2 * 1250 + 2 * 313 + 4 * 200);
    std::lock_guard lock(mu);
    dense_steps = dense;
  });
  INFO(tt::failures(results));
  REQUIRE(tt::failures(results).empty());
  CHECK(dense_steps >= 1);  // the warm-up's 25% steps went dense on the way
  CHECK(dense_steps <= 2);
}

}  // namespace murmur::optimizers::testing
