#include "topology/schedule.h"

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"
#include "topology/registry.h"

namespace murmur::topology {
namespace {

// Streams of Rng(seed) reserved for topology, so that gossip draws never coincide with the data
// shuffle or initialization streams other rooms fork from the same run seed.
constexpr std::uint64_t kMatchingStream = 0x746f706f6d617463ull;  // "topomatc"
constexpr std::uint64_t kKoutStream = 0x746f706f6b6f7574ull;      // "topokout"
constexpr std::uint64_t kGossipGradStream = 0x746f706f67677264ull;  // "topoggrd"

int ceil_log2(int n) {
  int tau = 0;
  while ((std::int64_t{1} << tau) < n) ++tau;
  return tau;
}

void check_round(std::int64_t round) {
  if (round < 0) throw ConfigError(fmt::format("topology: round {} (must be >= 0)", round));
}

// A uniform permutation of 0..n-1 (Fisher-Yates), the same on every peer for the same rng.
std::vector<int> draw_permutation(Rng& rng, int n) {
  std::vector<int> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  for (int i = n - 1; i > 0; --i) {
    std::swap(perm[i], perm[rng.below(static_cast<std::uint64_t>(i) + 1)]);
  }
  return perm;
}

void check_kout(int n, int k) {
  if (k < 1 || k > n - 1) {
    throw ConfigError(fmt::format(
        "topology.k: random_kout sends to k = {} others, which needs 1 <= k <= world.size - 1 = {}",
        k, n - 1));
  }
}

}  // namespace

bool is_time_varying(const TopologyConfig& c) { return find_graph(c.graph).time_varying; }

int period(const TopologyConfig& c, int n) { return find_graph(c.graph).period(n); }

int analysis_window(const TopologyConfig& c, int n) {
  const int p = period(c, n);
  return p > 0 ? p : std::max(8, 4 * ceil_log2(n));
}

Graph graph_at(const TopologyConfig& c, int n, std::uint64_t seed, std::int64_t round) {
  validate_world(c, n);
  check_round(round);
  return find_graph(c.graph).build(c, n, seed, round);
}

Graph one_peer_exponential(int n, std::int64_t round) {
  check_round(round);
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  if (n > 1) {
    const int tau = ceil_log2(n);
    const std::int64_t hop = std::int64_t{1} << (round % tau);
    for (int i = 0; i < n; ++i) out[i] = {static_cast<int>((i + hop) % n)};
  }
  return Graph{n, true, std::move(out)};
}

Graph random_matching(int n, std::uint64_t seed, std::int64_t round) {
  check_round(round);
  Rng rng = Rng(seed).fork(kMatchingStream).fork(static_cast<std::uint64_t>(round));
  const std::vector<int> perm = draw_permutation(rng, n);
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (int m = 0; m + 1 < n; m += 2) {
    out[perm[m]] = {perm[m + 1]};
    out[perm[m + 1]] = {perm[m]};
  }
  return Graph{n, false, std::move(out)};
}

Graph gossipgrad(int n, std::uint64_t seed, std::int64_t round) {
  check_round(round);
  require_power_of_two("gossipgrad", n);
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  if (n == 1) return Graph{n, false, std::move(out)};
  const int tau = ceil_log2(n);
  // The period's labelling: rank perm[v] plays hypercube vertex v for tau rounds.
  Rng rng = Rng(seed).fork(kGossipGradStream).fork(static_cast<std::uint64_t>(round / tau));
  const std::vector<int> perm = draw_permutation(rng, n);
  const int bit = 1 << (round % tau);
  for (int v = 0; v < n; ++v) out[perm[v]] = {perm[v ^ bit]};
  return Graph{n, false, std::move(out)};
}

Graph random_kout(int n, int k, std::uint64_t seed, std::int64_t round) {
  check_round(round);
  check_kout(n, k);
  const Rng base = Rng(seed).fork(kKoutStream).fork(static_cast<std::uint64_t>(round));
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  const int others = n - 1;
  for (int j = 0; j < n; ++j) {
    // Floyd's sampling of k distinct values in [0, others): k draws, whatever k and n are.
    Rng rng = base.fork(static_cast<std::uint64_t>(j));
    std::vector<int> picked;
    picked.reserve(static_cast<std::size_t>(k));
    for (int t = others - k; t < others; ++t) {
      const int v = static_cast<int>(rng.below(static_cast<std::uint64_t>(t) + 1));
      const bool seen = std::find(picked.begin(), picked.end(), v) != picked.end();
      picked.push_back(seen ? t : v);
    }
    for (int& v : picked) v += (v >= j);  // skip j itself: [0, n-1) -> [0, n) \ {j}
    std::sort(picked.begin(), picked.end());
    out[j] = std::move(picked);
  }
  return Graph{n, true, std::move(out)};
}

extern constinit const GraphInfo kOnePeerExponentialGraph{
    .name = "one_peer_exponential",
    .summary = "round t: i -> i + 2^(t mod tau) (mod n), tau = ceil(log2 n); one peer per round "
               "(Ying et al. 2021)",
    .directed = directed_always,
    .time_varying = true,
    .period = [](int n) { return std::max(1, ceil_log2(n)); },
    .validate = accepts_any_size,
    .build = [](const TopologyConfig&, int n, std::uint64_t, std::int64_t round) {
      return one_peer_exponential(n, round);
    }};

extern constinit const GraphInfo kRandomMatchingGraph{
    .name = "random_matching",
    .summary = "a random perfect matching drawn from (seed, round): random pairwise gossip",
    .directed = directed_never,
    .time_varying = true,
    .period = period_never,
    .validate = accepts_any_size,
    .build = [](const TopologyConfig&, int n, std::uint64_t seed, std::int64_t round) {
      return random_matching(n, seed, round);
    }};

extern constinit const GraphInfo kGossipGradGraph{
    .name = "gossipgrad",
    .summary = "round t: one partner, i <-> i xor 2^(t mod log2 n), the ranks relabelled at random "
               "every log2 n rounds (GossipGraD, Daily et al. 2018); n a power of 2",
    .directed = directed_never,
    .time_varying = true,
    .period = period_never,
    .validate = [](const TopologyConfig&, int n) { require_power_of_two("gossipgrad", n); },
    .build = [](const TopologyConfig&, int n, std::uint64_t seed, std::int64_t round) {
      return gossipgrad(n, seed, round);
    }};

extern constinit const GraphInfo kRandomKoutGraph{
    .name = "random_kout",
    .summary = "each rank sends to topology.k others drawn from (seed, round); directed",
    .directed = directed_always,
    .time_varying = true,
    .period = period_never,
    .validate = [](const TopologyConfig& c, int n) { check_kout(n, c.k); },
    .build = [](const TopologyConfig& c, int n, std::uint64_t seed, std::int64_t round) {
      return random_kout(n, c.k, seed, round);
    }};

}  // namespace murmur::topology
