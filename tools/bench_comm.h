// The patterns of `murmur-bench comm` (murmur_bench_comm.cc), for the subcommands that build on
// its measurements (murmur-bench fit).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/config.h"

namespace murmur::tools {

struct CommOptions {
  std::string backends;  // "" = every backend built
  std::vector<int> processes{2, 4};
  std::vector<std::int64_t> sizes{64 << 10, 1 << 20, 16 << 20, 64 << 20};
  std::int64_t chunk_bytes = 1 << 20;
  int poll_spin_us = TransportConfig{}.poll_spin_us;  // transport.poll_spin_us (tcp)
  std::vector<double> densities{0.001, 0.01, 0.1};  // the sparse allreduce's rows
  // Patterns to run, of p2p, put (one-sided p2p, where the backend has put()), ring_exchange, allreduce,
  // allreduce_direct, allreduce_hd (which brings the 16-bit and sparse rows with it); empty: all.
  std::vector<std::string> patterns;
  // Each timed round starts after the rank has written over 64 MiB (more than the last-level
  // cache), as a training step's forward and backward leave the caches for the exchange.
  bool cold = false;
  // The put rows: rank 1 busy for this long (no progress) before it waits for the writes.
  int put_busy_ms = 0;
  bool json = false;
};

// The non-empty items of a comma-separated list (--backends).
std::vector<std::string> split_list(const std::string& text);

// The options both subcommands take into `o`: --backends (described by `backends_help`),
// --processes, --sizes and --chunk-bytes.
void add_transfer_options(CLI::App& sub, CommOptions& o, const std::string& backends_help);

// Rank 0's rows of every pattern and size of `o` with `n` ranks of `backend` (forked processes
// on 127.0.0.1, threads for inproc): {"backend", "pattern", "processes", "bytes", "seconds",
// "gbps", ...}. Throws TransportError when a rank fails.
std::vector<nlohmann::json> comm_rows(const std::string& backend, int n, const CommOptions& o);

}  // namespace murmur::tools
