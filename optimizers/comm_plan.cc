#include "optimizers/comm_plan.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "optimizers/algorithm.h"
#include "topology/schedule.h"
#include "transport/collectives.h"

namespace murmur::optimizers {

double CommPlan::bytes_per_step() const {
  double total = 0;
  for (const CommPart& p : parts) total += p.per_step * p.phases * p.bytes_per_phase;
  return total;
}

double every_steps(int every, std::int64_t steps) {
  if (steps <= 0) return 1.0 / every;
  return static_cast<double>(steps / every) / static_cast<double>(steps);
}

std::vector<CommPart> allreduce_parts(std::string what, double bytes, int ranks,
                                      double chunk_bytes, double per_step, bool ring) {
  if (ranks < 2 || bytes <= 0) return {};
  const double n = ranks;
  const transport::AllreduceAlgorithm algorithm =
      ring ? transport::AllreduceAlgorithm::kRing
           : transport::auto_allreduce(static_cast<std::size_t>(ranks), bytes, chunk_bytes);
  if (algorithm == transport::AllreduceAlgorithm::kDirect) {
    // Two phases (reduce-scatter, allgather), each N-1 messages of one segment at once.
    const double segment = bytes / n;
    return {{std::move(what), per_step, 2, segment, (n - 1) * segment, 1}};
  }
  if (algorithm == transport::AllreduceAlgorithm::kRing) {
    // Each segment in pieces of at most chunk_bytes (transport/collectives.cc).
    const double segment = bytes / n;
    const double chunks = std::max(1.0, std::ceil(segment / chunk_bytes));
    return {{std::move(what), per_step, 2 * (n - 1), segment / chunks, segment, chunks}};
  }
  // Halving and doubling over the largest power of two p <= N; the q = N - p others fold their
  // vector into a partner first and take the result back last (two phases of the whole vector).
  // Each level's size is sent twice: halving on the way in, doubling on the way out.
  int p = 1;
  while (2 * p <= ranks) p *= 2;
  std::vector<CommPart> parts;
  // Pieces of chunk_bytes, sent one after the other within a level (no pipeline across levels).
  const auto piece = [&](double size) { return std::min(size, chunk_bytes); };
  if (p < ranks) parts.push_back({what + " (fold in and out)", per_step, 2, piece(bytes), bytes});
  double size = bytes;
  for (int k = 1; k < p; k *= 2) {
    size /= 2;
    parts.push_back({fmt::format("{} (level of {} B)", what, size), 2 * per_step, 1, piece(size), size});
  }
  return parts;
}

double mean_out_degree(const TopologyConfig& topology, int n, std::uint64_t seed) {
  if (n < 2) return 0;
  // A period's rounds where the schedule repeats, a sample of 64 of random gossip.
  const int period = topology::period(topology, n);
  const int rounds = period > 0 ? std::min(period, 64) : 64;
  double edges = 0;
  for (int t = 0; t < rounds; ++t) {
    const topology::Graph g = topology::graph_at(topology, n, seed, t);
    for (const auto& out : g.out) edges += static_cast<double>(out.size());
  }
  return edges / (static_cast<double>(rounds) * n);
}

CommPart neighbor_part(std::string what, const PlanContext& c, double bytes, double per_step) {
  const double degree = mean_out_degree(c.config.topology, c.config.world.size, c.config.run.seed);
  return {std::move(what), per_step, 1, bytes, degree * bytes};
}

CommPlan comm_plan(const PlanContext& c) {
  CommPlan plan;
  if (c.config.world.size < 2) return plan;
  const AlgorithmInfo& info = find_algorithm(c.config.algorithm.name);
  if (!info.plan) {
    plan.note = fmt::format("algorithm {} states no plan", info.name);
    return plan;
  }
  return info.plan(c);
}

}  // namespace murmur::optimizers
