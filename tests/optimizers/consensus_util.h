// Shared by the consensus tests: runs an averaging algorithm on n ranks (inproc threads or
// forked processes, via the transport test harness) with random initial vectors and no
// gradients, and returns the distance to the initial mean after every round. Each rank derives
// every rank's initial vector from the seed, so it knows the true mean without communicating;
// ranks write their per-round distances to files in a fresh temp dir that the caller sums.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"
#include "device/device.h"
#include "membership/neighborhood.h"
#include "optimizers/algorithm.h"
#include "optimizers/staging_transport.h"
#include "transport/float_ops.h"
#include "transport/transport.h"

namespace murmur::optimizers::testing {

// An algorithm built as the runtime builds it (runtime/distributed.cc): over a StagingTransport
// when `device` is off the host, with a strict Neighborhood (or a live one over `live`), the
// parameters registered. Members in creation order, destroyed in reverse.
struct BuiltAveraging {
  std::unique_ptr<StagingTransport> staging;
  std::unique_ptr<transport::FloatOps> ops;
  std::unique_ptr<membership::Neighborhood> hood;
  std::unique_ptr<transport::Region> region;
  std::unique_ptr<Averaging> averaging;
};
BuiltAveraging build_averaging(transport::Transport& transport, device::Device& device,
                               const AlgorithmConfig& algorithm, const TopologyConfig& topology,
                               const TransportConfig& transport_config, std::span<float> params,
                               std::uint64_t seed, membership::LiveSet* live = nullptr,
                               int ranks_per_node = 1);

struct ConsensusRun {
  std::string backend = "inproc";
  bool offhost = false;  // the parameters on an off-host device (staged transfers)
  int ranks = 8;
  TopologyConfig topology;
  AlgorithmConfig algorithm;
  int rounds = 10;
  std::size_t dim = 1000;
  std::uint64_t seed = 7;
  // Slept before each step: an asynchronous algorithm (adpsgd) averages while the step computes,
  // and steps of no work would end the run before it exchanged much.
  std::chrono::microseconds pause{0};
};

struct ConsensusResult {
  std::string failures;  // "" when every rank returned normally
  std::vector<double>
      error;           // error[t]: sqrt(sum_r ||z_r - mean||^2) after t rounds (t = 0..rounds)
  double flushed = 0;  // the same after flush() following the last round
  double spread = 0;   // max over ranks and entries of |z_r - z_0| after flush()
};

// Rank r's initial entry i: standard normal from Rng(seed).fork(r).
std::vector<float> initial_vector(std::uint64_t seed, int rank, std::size_t dim);

ConsensusResult run_consensus(const ConsensusRun& run);

// The process backends the consensus tests run on: tcp, and ucx where this build has it.
std::vector<std::string> process_backends_for_tests();

// The second-largest eigenvalue modulus of the round-0 mixing matrix.
double slem(const TopologyConfig& topology, int n, std::uint64_t seed);

TopologyConfig graph(const std::string& name, const std::string& weights = "uniform", int k = 1);
AlgorithmConfig algorithm(const std::string& name);

}  // namespace murmur::optimizers::testing
