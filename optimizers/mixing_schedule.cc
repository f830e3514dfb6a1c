#include "optimizers/mixing_schedule.h"

#include "topology/schedule.h"

namespace murmur::optimizers {

MixingSchedule::MixingSchedule(const TopologyConfig& config, int n, int rank, std::uint64_t seed)
    : config_(config),
      n_(n),
      rank_(rank),
      seed_(seed),
      time_varying_(topology::is_time_varying(config)) {
  current_ = topology::rank_mixing(config_, n_, rank_, seed_, 0);
  round_ = 0;
}

const topology::RankMixing& MixingSchedule::at(std::int64_t round) {
  if (time_varying_ && round != round_) {
    current_ = topology::rank_mixing(config_, n_, rank_, seed_, round);
    round_ = round;
  }
  return current_;
}


topology::RankMixing renormalize(const topology::RankMixing& m, const membership::Neighborhood& hood,
                                 std::int64_t step, Renormalize how) {
  topology::RankMixing out;
  out.self_weight = m.self_weight;
  for (std::size_t k = 0; k < m.recv_from.size(); ++k) {
    if (hood.alive(m.recv_from[k], step)) {
      out.recv_from.push_back(m.recv_from[k]);
      out.recv_weights.push_back(m.recv_weights[k]);
    } else if (how == Renormalize::kRow) {
      out.self_weight += m.recv_weights[k];  // the row keeps summing to 1
    }
  }
  for (std::size_t k = 0; k < m.send_to.size(); ++k) {
    const double w = k < m.send_weights.size() ? m.send_weights[k] : 0.0;
    if (hood.alive(m.send_to[k], step)) {
      out.send_to.push_back(m.send_to[k]);
      if (k < m.send_weights.size()) out.send_weights.push_back(w);
    } else if (how == Renormalize::kColumn) {
      out.self_weight += w;  // the column keeps summing to 1: no mass is pushed into the void
    }
  }
  return out;
}

}  // namespace murmur::optimizers
