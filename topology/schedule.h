// Time-varying topologies: the graph of round t as a pure function of (config, n, seed, t).
// Every peer calls graph_at with the same arguments and gets the same graph, which is what lets
// random gossip run without a coordinator. Static graphs come back unchanged in every round.
// Thread-safe: no state; random draws use a fresh murmur::Rng derived from (seed, round).
#pragma once

#include <cstdint>

#include "core/config.h"
#include "topology/graph.h"

namespace murmur::topology {

// Returns true iff the graph changes between rounds (one_peer_exponential, random_matching,
// gossipgrad, random_kout): its row's time_varying. Throws ConfigError for an unknown graph
// name.
bool is_time_varying(const TopologyConfig& config);

// Rounds after which the schedule repeats: 1 for a static graph, tau = ceil(log2 n) for
// one_peer_exponential (1 when n = 1), and 0 for random gossip, which never repeats (its
// row's period). Throws ConfigError for an unknown graph name.
int period(const TopologyConfig& config, int n);

// Rounds whose product spectral analysis looks at (spectral.h): the period where there is one,
// else (random gossip) a sampled window of max(8, 4 * ceil(log2 n)) rounds.
int analysis_window(const TopologyConfig& config, int n);

// The graph used in round `round` (>= 0). Calls validate_world first; throws ConfigError as it does.
Graph graph_at(const TopologyConfig& config, int n, std::uint64_t seed, std::int64_t round);

// One-peer exponential graph (Ying et al. 2021): in round t, rank i sends to
// i + 2^(t mod tau) (mod n), tau = ceil(log2 n). Directed, one in- and one out-neighbor.
Graph one_peer_exponential(int n, std::int64_t round);

// A perfect matching from a permutation drawn from (seed, round): ranks perm[2m] and
// perm[2m+1] exchange both ways; with n odd the last rank of the permutation sits out.
Graph random_matching(int n, std::uint64_t seed, std::int64_t round);

// GossipGraD's partner schedule (Daily et al. 2018): in round t, vertex v of a hypercube pairs
// with v xor 2^(t mod tau), tau = log2 n, so each rank talks to one partner per round and a
// value on one rank reaches all n within tau rounds (the product of a period's 1/2-weighted
// matchings is the exact average). Which rank plays which vertex is a permutation drawn from
// (seed, t / tau): the partners rotate every period, as GossipGraD rotates them so that no rank
// keeps the same log2 n partners. Undirected; n must be a power of 2 (ConfigError otherwise).
Graph gossipgrad(int n, std::uint64_t seed, std::int64_t round);

// Each rank j sends to k distinct other ranks drawn from (seed, round, j). Directed; in-degrees
// vary, so its uniform weights are column-stochastic (push-sum), not row-stochastic.
Graph random_kout(int n, int k, std::uint64_t seed, std::int64_t round);

}  // namespace murmur::topology
