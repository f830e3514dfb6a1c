#include "nn/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "core/name_table.h"
#include "core/names.h"

namespace murmur::nn {
namespace {

constexpr std::uint64_t kPartitionStream = 0x70617274;  // "part"

// Fisher-Yates on our own Rng (std::shuffle's draws differ between standard libraries).
void shuffle(std::vector<std::int64_t>& v, Rng& rng) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

std::vector<std::vector<std::int64_t>> split_iid(std::int64_t n, int world, Rng& rng) {
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) perm[i] = i;
  shuffle(perm, rng);
  std::vector<std::vector<std::int64_t>> shards(world);
  for (int r = 0; r < world; ++r)
    shards[r].assign(perm.begin() + n * r / world, perm.begin() + n * (r + 1) / world);
  return shards;
}

std::vector<std::vector<std::int64_t>> split_dirichlet(const std::vector<std::int32_t>& labels,
                                                       int classes, int world, double alpha,
                                                       Rng& rng) {
  std::vector<std::vector<std::int64_t>> by_class(classes);
  for (std::size_t i = 0; i < labels.size(); ++i)
    by_class[labels[i]].push_back(static_cast<std::int64_t>(i));
  std::vector<std::vector<std::int64_t>> shards(world);
  for (auto& members : by_class) {
    // Draw p even for an empty class, so each class consumes the same draws whatever the sizes.
    const std::vector<double> p = sample_dirichlet(rng, alpha, world);
    shuffle(members, rng);
    const auto n = static_cast<std::int64_t>(members.size());
    double cum = 0.0;
    std::int64_t begin = 0;
    for (int r = 0; r < world; ++r) {
      cum += p[r];
      std::int64_t end = r + 1 == world ? n : static_cast<std::int64_t>(std::floor(cum * n));
      end = std::clamp(end, begin, n);
      shards[r].insert(shards[r].end(), members.begin() + begin, members.begin() + end);
      begin = end;
    }
  }
  // The empty-shard repair documented in partition.h.
  for (auto& shard : shards) {
    if (!shard.empty()) continue;
    auto largest = std::max_element(shards.begin(), shards.end(), [](const auto& a, const auto& b) {
      return a.size() < b.size();
    });
    shard.push_back(largest->back());
    largest->pop_back();
  }
  return shards;
}

}  // namespace

double sample_log_gamma(Rng& rng, double alpha) {
  if (alpha < 1.0) {
    double u = rng.uniform();
    while (u <= 0.0) u = rng.uniform();
    return sample_log_gamma(rng, alpha + 1.0) + std::log(u) / alpha;
  }
  const double d = alpha - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = rng.normal();
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = rng.uniform();
    // The squeeze accepts ~98% of draws without a log; the exact test handles the rest.
    if (u < 1.0 - 0.0331 * (x * x) * (x * x)) return std::log(d * v);
    if (u > 0.0 && std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return std::log(d * v);
  }
}

double sample_gamma(Rng& rng, double alpha) { return std::exp(sample_log_gamma(rng, alpha)); }

std::vector<double> sample_dirichlet(Rng& rng, double alpha, int k) {
  std::vector<double> p(static_cast<std::size_t>(k));
  double top = -std::numeric_limits<double>::infinity();
  for (double& x : p) {
    x = sample_log_gamma(rng, alpha);
    top = std::max(top, x);
  }
  double sum = 0.0;
  for (double& x : p) sum += (x = std::exp(x - top));
  for (double& x : p) x /= sum;
  return p;
}

namespace {

// The splits, one row each: what data.partition takes.
struct PartitionEntry {
  std::string_view name;
  std::vector<std::vector<std::int64_t>> (*split)(const std::vector<std::int32_t>& labels,
                                                  int classes, int world,
                                                  const DataConfig& config, Rng& rng);
};
const PartitionEntry kPartitions[] = {
    {"iid", [](const std::vector<std::int32_t>& labels, int, int world, const DataConfig&, Rng& rng) {
       return split_iid(static_cast<std::int64_t>(labels.size()), world, rng);
     }},
    {"dirichlet", [](const std::vector<std::int32_t>& labels, int classes, int world,
                     const DataConfig& config, Rng& rng) {
       if (!(config.dirichlet_alpha > 0.0))
         throw ConfigError(fmt::format("data.dirichlet_alpha: {} must be > 0", config.dirichlet_alpha));
       return split_dirichlet(labels, classes, world, config.dirichlet_alpha, rng);
     }},
};
[[maybe_unused]] const bool kRegistered = register_names("data.partition", partition_names());

const PartitionEntry& find_partition(std::string_view name) {
  return find_named(std::span<const PartitionEntry>(kPartitions), name, "data.partition", "split");
}

}  // namespace

std::vector<std::string_view> partition_names() {
  return names_of(std::span<const PartitionEntry>(kPartitions));
}

std::vector<std::vector<std::int64_t>> partition_all(const std::vector<std::int32_t>& labels,
                                                     int classes, int world,
                                                     const DataConfig& config, std::uint64_t seed) {
  if (world < 1) throw ConfigError(fmt::format("world.size: {} peers, need at least 1", world));
  const auto n = static_cast<std::int64_t>(labels.size());
  if (n < world)
    throw DataError(
        fmt::format("data set of {} samples cannot give each of {} peers a sample", n, world));
  for (std::int64_t i = 0; i < n; ++i)
    if (labels[i] < 0 || labels[i] >= classes)
      throw DataError(
          fmt::format("label {} at index {} is outside [0, {})", labels[i], i, classes));

  Rng rng = Rng(seed).fork(kPartitionStream);
  std::vector<std::vector<std::int64_t>> shards =
      find_partition(config.partition).split(labels, classes, world, config, rng);
  for (auto& s : shards) std::sort(s.begin(), s.end());
  return shards;
}

std::vector<std::int64_t> partition_indices(const std::vector<std::int32_t>& labels, int classes,
                                            int world, int rank, const DataConfig& config,
                                            std::uint64_t seed) {
  if (rank < 0 || rank >= world)
    throw ConfigError(fmt::format("world.rank: {} is outside [0, {})", rank, world));
  return std::move(partition_all(labels, classes, world, config, seed)[rank]);
}

}  // namespace murmur::nn
