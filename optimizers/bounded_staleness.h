// D-PSGD with bounded staleness (`dpsgd` with algorithm.max_staleness: s > 0), the stale
// synchronous parallel rule (Ho et al. 2013, "More Effective Distributed ML via a Stale
// Synchronous Parallel Parameter Server") applied to gossip: at round t a peer sends its model
// to its out-neighbors and mixes, x_i <- W_ii x_i + sum_j W_ij x_j^(r_j), with the freshest model
// each in-neighbor j has sent, as long as it is of round r_j >= t - s; it waits only for a
// neighbor more than s rounds behind. s = 0 is dpsgd's lockstep exchange (that path, dpsgd.cc);
// a large s lets a fast peer run ahead of a straggler, as AD-PSGD does, at the price of mixing
// older models (the mean is no longer kept exactly; the rounds' ages are counted).
//
// Nothing waits in a transport's unexpected-message queue and no send waits on a peer that is
// busy computing: a peer keeps receives posted for every round a neighbor may send before this
// peer's next round (t + 1 ... t + s), and sends from a ring of snapshots it reuses only once the
// send of 2s + 2 rounds ago has landed. Hence (2s + 2) + (2s + 1) x in-degree copies of the
// model; s is at most 64. Static graphs only; a lost neighbor is dropped for the rest of the run
// (its weight goes back to this peer's own) and a restarted one is not taken back. Runs on host
// or GPU memory through the device's op table. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "optimizers/algorithm.h"
#include "optimizers/recv_slots.h"
#include "topology/mixing.h"
#include "transport/tag.h"

namespace murmur::optimizers {

inline constexpr int kMaxStaleness = 64;

class BoundedStaleness final : public Averaging {
 public:
  explicit BoundedStaleness(const AveragingContext& ctx);
  ~BoundedStaleness() override;
  void after_step(std::int64_t step) override;
  // Receives every round the in-neighbors sent up to this peer's last one, so that their sends
  // land, withdraws the receives posted beyond, tells them so, and returns once this peer's sends
  // have landed and every out-neighbor has said the same: no peer leaves while a neighbor still
  // holds a receive for it. The peers must end at the same round.
  void finish() override;
  std::optional<ExchangeReport> exchange_report() const override { return report_; }

 private:
  struct Neighbor {
    int rank = -1;
    double weight = 0;
    bool dropped = false;
    std::vector<transport::Request> recvs;  // by round % ring_, for posted_[...]
    std::vector<std::int64_t> posted;       // the round of each ring slot's receive, or -1
    std::int64_t freshest = -1;             // the newest round landed
  };
  std::size_t ring_index(std::int64_t round) const;  // a neighbor's receive of `round`
  std::size_t slot_of(std::size_t k, std::int64_t round) const;
  void post_through(std::int64_t round);  // receives for every round up to `round`
  void drain(std::size_t k);              // takes the receives of neighbor k that have landed
  bool await(std::size_t k, std::int64_t round);  // until neighbor k's round has landed
  void drop(std::size_t k, std::int64_t step);
  void send(std::int64_t round, std::int64_t step);

  membership::Neighborhood& hood_;
  device::Device& device_;
  std::span<float> params_;
  int local_steps_;
  int s_;
  unsigned purpose_;
  transport::TagLayout layout_;
  topology::RankMixing mixing_;
  std::int64_t ring_;       // receive slots per neighbor: 2s + 1
  std::int64_t send_ring_;  // snapshots: 2s + 2
  std::vector<Neighbor> in_;
  std::vector<int> out_;
  std::vector<bool> out_dropped_;
  std::int64_t posted_through_ = -1;  // receives are posted for every round up to this one
  std::int64_t last_round_ = -1;
  RecvSlots slots_;      // neighbor k's round r lands in slot k * ring_ + r % ring_
  RecvSlots snapshots_;  // round r is sent from snapshot r % send_ring_
  std::vector<std::vector<transport::Request>> sends_;  // by snapshot
  std::vector<const float*> inputs_;
  std::vector<float> weights_;
  ExchangeReport report_;
  // finish()'s end notices: the one this peer sends, then one from each out-neighbor.
  device::Array notices_;
  std::unique_ptr<transport::Region> notices_region_;
};

}  // namespace murmur::optimizers
