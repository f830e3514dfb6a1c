// Partitioning across peers: each shard list covers every sample exactly once, is the same for
// the same seed on every peer, IID shards are label-balanced, and a small Dirichlet alpha skews
// labels. Also the Gamma/Dirichlet samplers' moments.
#include "nn/partition.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.h"
#include "core/rng.h"

using murmur::DataConfig;
using murmur::Rng;
using murmur::nn::partition_all;
using murmur::nn::partition_indices;
using murmur::nn::sample_dirichlet;
using murmur::nn::sample_gamma;

namespace {

std::vector<std::int32_t> cyclic_labels(std::int64_t n, int classes) {
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) labels[i] = static_cast<std::int32_t>(i % classes);
  return labels;
}

DataConfig config(const char* partition, double alpha = 1.0) {
  DataConfig c;
  c.partition = partition;
  c.dirichlet_alpha = alpha;
  return c;
}

void check_disjoint_cover(const std::vector<std::vector<std::int64_t>>& shards, std::int64_t n) {
  std::vector<int> seen(static_cast<std::size_t>(n), 0);
  for (const auto& s : shards) {
    CHECK(!s.empty());
    CHECK(std::is_sorted(s.begin(), s.end()));
    for (auto i : s) {
      REQUIRE(i >= 0);
      REQUIRE(i < n);
      ++seen[i];
    }
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
}

// Largest fraction of one label in a shard, averaged over shards: 1/classes when balanced,
// near 1 when each peer holds a single class.
double mean_top_label_share(const std::vector<std::vector<std::int64_t>>& shards,
                            const std::vector<std::int32_t>& labels, int classes) {
  double total = 0;
  for (const auto& s : shards) {
    std::vector<int> count(classes, 0);
    for (auto i : s) ++count[labels[i]];
    total += static_cast<double>(*std::max_element(count.begin(), count.end())) / s.size();
  }
  return total / shards.size();
}

}  // namespace

TEST_CASE("IID shards are a disjoint cover of nearly equal size", "[nn][partition]") {
  const auto labels = cyclic_labels(1003, 10);
  for (int world : {1, 2, 3, 8, 1003}) {
    const auto shards = partition_all(labels, 10, world, config("iid"), 5);
    REQUIRE(shards.size() == static_cast<std::size_t>(world));
    check_disjoint_cover(shards, 1003);
    for (const auto& s : shards) {
      CHECK(s.size() >= static_cast<std::size_t>(1003 / world));
      CHECK(s.size() <= static_cast<std::size_t>(1003 / world + 1));
    }
  }
}

TEST_CASE("every peer computes the same shards from the same seed", "[nn][partition]") {
  const auto labels = cyclic_labels(2000, 10);
  for (const char* kind : {"iid", "dirichlet"}) {
    const auto all = partition_all(labels, 10, 6, config(kind, 0.3), 11);
    for (int rank = 0; rank < 6; ++rank)
      CHECK(partition_indices(labels, 10, 6, rank, config(kind, 0.3), 11) == all[rank]);
    CHECK(partition_all(labels, 10, 6, config(kind, 0.3), 12) != all);  // the seed matters
  }
}

TEST_CASE("IID shards are label-balanced", "[nn][partition]") {
  const auto labels = cyclic_labels(20000, 10);
  const auto shards = partition_all(labels, 10, 4, config("iid"), 3);
  for (const auto& s : shards) {
    std::vector<int> count(10, 0);
    for (auto i : s) ++count[labels[i]];
    for (int k : count) CHECK(std::abs(k - 500) < 100);  // 5000 per shard, 500 per class
  }
}

TEST_CASE("Dirichlet shards cover every sample and small alpha skews labels", "[nn][partition]") {
  const auto labels = cyclic_labels(20000, 10);
  const auto skewed = partition_all(labels, 10, 8, config("dirichlet", 0.1), 9);
  const auto mild = partition_all(labels, 10, 8, config("dirichlet", 100.0), 9);
  check_disjoint_cover(skewed, 20000);
  check_disjoint_cover(mild, 20000);
  const double skew = mean_top_label_share(skewed, labels, 10);
  const double flat = mean_top_label_share(mild, labels, 10);
  CHECK(skew > 0.5);
  CHECK(flat < 0.2);
  CHECK(flat ==
        Approx(mean_top_label_share(partition_all(labels, 10, 8, config("iid"), 9), labels, 10))
            .margin(0.05));
}

TEST_CASE("tiny alpha and many peers still leave no shard empty", "[nn][partition]") {
  // alpha = 1e-6 gives each class to one peer; 2 classes over 16 peers leaves 14 with nothing
  // before the repair.
  const auto labels = cyclic_labels(64, 2);
  const auto shards = partition_all(labels, 2, 16, config("dirichlet", 1e-6), 1);
  check_disjoint_cover(shards, 64);
  // Exactly as many peers as samples: one each.
  const auto tight = partition_all(cyclic_labels(16, 2), 2, 16, config("dirichlet", 1e-6), 1);
  for (const auto& s : tight) CHECK(s.size() == 1);
}

TEST_CASE("partition rejects bad input", "[nn][partition]") {
  const auto labels = cyclic_labels(10, 3);
  CHECK_THROWS_AS(partition_all(labels, 3, 11, config("iid"), 0), murmur::DataError);
  CHECK_THROWS_AS(partition_all(labels, 3, 0, config("iid"), 0), murmur::ConfigError);
  CHECK_THROWS_AS(partition_indices(labels, 3, 2, 2, config("iid"), 0), murmur::ConfigError);
  CHECK_THROWS_AS(partition_indices(labels, 3, 2, -1, config("iid"), 0), murmur::ConfigError);
  CHECK_THROWS_AS(partition_all(labels, 3, 2, config("shards"), 0), murmur::ConfigError);
  CHECK_THROWS_AS(partition_all(labels, 3, 2, config("dirichlet", 0.0), 0), murmur::ConfigError);
  CHECK_THROWS_AS(partition_all(labels, 2, 2, config("iid"), 0), murmur::DataError);  // label 2
}

TEST_CASE("Gamma and Dirichlet samplers have the right moments", "[nn][partition]") {
  for (double alpha : {0.1, 0.5, 1.0, 2.5, 10.0}) {
    Rng rng(alpha * 1000);
    const int n = 40000;
    double sum = 0, sq = 0;
    for (int i = 0; i < n; ++i) {
      const double g = sample_gamma(rng, alpha);
      REQUIRE(g >= 0.0);
      sum += g, sq += g * g;
    }
    const double mean = sum / n, var = sq / n - mean * mean;
    INFO("alpha " << alpha);
    CHECK(mean == Approx(alpha).epsilon(0.05));  // Gamma(alpha, 1): mean = variance = alpha
    CHECK(var == Approx(alpha).epsilon(0.1));
  }
  Rng rng(3);
  for (double alpha : {1e-6, 0.05, 1.0, 50.0}) {
    double first = 0;
    for (int i = 0; i < 2000; ++i) {
      const auto p = sample_dirichlet(rng, alpha, 5);
      CHECK(std::accumulate(p.begin(), p.end(), 0.0) == Approx(1.0));
      first += p[0];
    }
    CHECK(first / 2000 == Approx(0.2).margin(0.04));  // symmetric: each mean is 1/k
  }
}
