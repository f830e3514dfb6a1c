// Splits a data set's sample indices across the peers of a world. Pure functions of (labels,
// config, seed): every peer computes all shards by itself and keeps its own, so the shards agree
// across peers with no communication. Every sample lands in exactly one shard.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/rng.h"

namespace murmur::nn {

// The names data.partition takes ("iid", "dirichlet").
std::vector<std::string_view> partition_names();

// All `world` shards, each sorted ascending. config.partition selects:
// - "iid": a seeded permutation cut into `world` contiguous shards whose sizes differ by <= 1.
// - "dirichlet": for each class, proportions p ~ Dir(alpha) over the peers, and that class's
//   samples (in seeded random order) are cut at floor(cumsum(p) * n_class) (Hsu et al. 2019,
//   "Measuring the effects of non-identical data distribution", as in NIID-Bench). Small alpha
//   gives each peer few classes; large alpha approaches IID.
// Empty shards: IID never makes one when size >= world. Dirichlet may (tiny alpha, few classes);
// then, in ascending rank order, each empty shard takes the last sample of the currently largest
// shard (lowest rank on ties), so every peer has at least one sample. Deterministic, so all peers
// repair identically. Throws DataError if there are fewer samples than peers or a label is out of
// [0, classes); ConfigError for world < 1 or an unknown partition name.
std::vector<std::vector<std::int64_t>> partition_all(const std::vector<std::int32_t>& labels,
                                                     int classes, int world,
                                                     const DataConfig& config, std::uint64_t seed);

// This rank's shard: partition_all(...)[rank]. Throws ConfigError unless 0 <= rank < world.
std::vector<std::int64_t> partition_indices(const std::vector<std::int32_t>& labels, int classes,
                                            int world, int rank, const DataConfig& config,
                                            std::uint64_t seed);

// log of a Gamma(alpha, 1) draw, alpha > 0, by Marsaglia & Tsang (2000), "A simple method for
// generating gamma variables"; for alpha < 1 via Gamma(alpha + 1) * U^(1/alpha) (their sec. 6),
// kept in log space because U^(1/alpha) underflows for tiny alpha.
double sample_log_gamma(Rng& rng, double alpha);
// A Gamma(alpha, 1) draw (may underflow to 0 for alpha << 1; use sample_log_gamma then).
double sample_gamma(Rng& rng, double alpha);
// p ~ Dirichlet(alpha, ..., alpha) over k outcomes, normalized in log space so it sums to 1 even
// when every Gamma draw would underflow.
std::vector<double> sample_dirichlet(Rng& rng, double alpha, int k);

}  // namespace murmur::nn
