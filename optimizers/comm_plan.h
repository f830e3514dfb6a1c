// What an averaging algorithm sends, per training step, in the terms of the cost model
// (transport/cost_model.h): phases that follow one another, in each of which every rank sends
// some bytes in messages of one size. Each algorithm states its own plan in its registry entry
// (AlgorithmInfo::plan) from the config, the graph and the model's size; the runtime prices it
// with the machine's fit to predict comm_s beside the measured one (runtime/comm_prediction.h).
// Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace murmur::optimizers {

// `phases` phases of `bytes_per_phase` sent per rank in messages of `message_bytes`, `per_step`
// times a training step (1/H for an exchange every H steps). A phase's bytes travel in `chunks`
// pieces, pipelined across the phases (the ring allreduce: piece c of phase k+1 leaves once piece
// c of phase k is in), so the phases take phases + chunks - 1 piece times, not phases x chunks.
struct CommPart {
  std::string what;  // e.g. "ring allreduce of the parameters"
  double per_step = 1;
  double phases = 1;
  double message_bytes = 0;
  double bytes_per_phase = 0;
  double chunks = 1;
};

struct CommPlan {
  std::vector<CommPart> parts;
  std::string note;  // what the plan leaves out, if anything (shown beside the prediction)
  // Bytes a rank sends per step, as the plan counts them.
  double bytes_per_step() const;
};

struct PlanContext {
  const ExperimentConfig& config;
  std::size_t parameters = 0;  // floats in the parameter arena
  std::int64_t steps = 0;      // the run's training steps (schedules that change over a run)
};

// The share of a run's steps that end in an exchange made every `every` steps: floor(steps /
// every) / steps (1 / every where the run's steps are not known).
double every_steps(int every, std::int64_t steps);
// The exact average of `bytes` over `ranks` as transport::Allreduce runs it, `per_step` times
// a step: direct (2 phases of N-1 messages of bytes/N) for 3 and 4 ranks whose segments fit in
// one piece of `chunk_bytes`, else the ring (2(N-1) phases of bytes/N, pipelined in pieces) up
// to kRingMaxRanks ranks, recursive halving and doubling above (2 log2 phases, halving in size).
// `ring` says the caller runs the ring whatever the size (the 16-bit wire's HalfRingAllreduce).
std::vector<CommPart> allreduce_parts(std::string what, double bytes, int ranks,
                                      double chunk_bytes, double per_step, bool ring = false);
// Every rank sends `bytes` to each of its out-neighbors at once: one phase of degree * bytes,
// with the mean out-degree over the ranks and the first rounds of the topology's schedule.
CommPart neighbor_part(std::string what, const PlanContext& c, double bytes, double per_step);
// The mean number of out-neighbors of a rank (edges i -> j, j != i, of positive weight) over
// the ranks and the first rounds of the topology's schedule.
double mean_out_degree(const TopologyConfig& topology, int n, std::uint64_t seed);

// The plan of the algorithm named by the config, or a plan with no parts and a note saying
// why where its algorithm states none.
CommPlan comm_plan(const PlanContext& c);

}  // namespace murmur::optimizers
