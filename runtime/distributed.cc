#include "runtime/distributed.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <limits>

#include "optimizers/live_allreduce.h"
#include "topology/mixing.h"
#include "topology/schedule.h"
#include "transport/collectives.h"
#include "transport/factory.h"

namespace murmur::runtime {
namespace {

// Tags of the runtime's own collectives: below 2^24, where no algorithm's ring tags are
// (theirs are purpose << 24 | round, purpose >= 1), and small enough that RingAllreduce's
// tag << 32 still fits the 62 tag bits UCX leaves beside the source rank of a small world.
constexpr transport::Tag kAverageTag = 0x00FFFF01;
constexpr transport::Tag kDistanceTag = 0x00FFFF02;

transport::CollectiveOptions collective_options(const TransportConfig& t) {
  transport::CollectiveOptions o;
  o.timeout = std::chrono::milliseconds(t.recv_timeout_ms);
  o.chunk_bytes = static_cast<std::size_t>(t.chunk_bytes);
  return o;
}

}  // namespace

Distributed::Distributed(const ExperimentConfig& config, int rank, Arena& params,
                         std::shared_ptr<transport::Transport> transport)
    : config_(config),
      transport_(transport ? std::move(transport)
                           : std::shared_ptr<transport::Transport>(transport::make_transport(
                                 config.transport, rank, config.world.size))),
      params_region_(transport_->register_region(params.bytes())),
      scratch_(params.clone_layout()),
      scratch_region_(transport_->register_region(scratch_.bytes())),
      params_(params.flat()) {
  if (config.run.on_peer_failure == "continue") {
    live_ = std::make_unique<optimizers::LiveSet>(
        config.world.size, transport_->rank(),
        std::chrono::milliseconds(config.transport.peer_timeout_ms),
        std::chrono::milliseconds(config.transport.recv_timeout_ms));
    // A rank given up for dead is told so, by the connection closing (tcp): a false death (a
    // partition that heals) ends with both sides apart, not with one waiting on the other.
    live_->on_dead([t = transport_.get()](int r) { t->drop(r); });
  }
  optimizers::AveragingContext ctx{config.algorithm,  config.topology, config.transport,
                                   *transport_,       *params_region_, params.flat(),
                                   config.run.seed,   live_.get()};
  averaging_ = optimizers::make_averaging(ctx);
  if (live_ && is_gossip(config.algorithm.name)) {
    // Neighbors' steps drift apart by at most about one per hop: a rejoin takes effect this
    // many steps after the answer, so that the rejoining peer can be there in time. The slack of
    // 200 steps covers the rejoining peer's connecting to its other neighbors: a neighbor that
    // reached the join step before the others had even seen the request waited for the
    // rejoining peer, which waited for their answers, which waited on it (broken only by
    // timeouts, after which the peers' views of who is alive fell apart; seen in tests).
    const std::int64_t margin =
        static_cast<std::int64_t>(config.world.size + 2) * config.algorithm.local_steps + 200;
    responder_ = std::make_unique<optimizers::JoinResponder>(*transport_, *live_, params_, margin);
  } else if (live_ && is_allreduce_family(config.algorithm.name)) {
    // Counted in the algorithm's rounds (live_clock); the rejoining peer adds the rounds the
    // others run while it gathers their answers (rejoin.h). The margin is slack.
    const std::int64_t margin = config.world.size + 2 + 50;
    responder_ = std::make_unique<optimizers::JoinResponder>(*transport_, *live_, params_, margin,
                                                             optimizers::JoinStep::kAgreed);
  }
}

bool Distributed::is_gossip(const std::string& algorithm) {
  return algorithm == "dpsgd" || algorithm == "sgp" || algorithm == "adpsgd";
}

bool Distributed::is_allreduce_family(const std::string& algorithm) {
  // Not diloco: a rejoining peer would need the others' outer model and momentum too, not only
  // their parameters. It (and choco) leaves a restarted peer out: it trains alone.
  return algorithm == "allreduce" || algorithm == "local_sgd";
}

void Distributed::after_step(std::int64_t step) {
  averaging_->after_step(step);
  if (responder_) responder_->poll(step, averaging_->live_clock(step));
}

std::int64_t Distributed::rejoin(std::int64_t step) {
  if (!live_) return step;
  // Ask the ranks this one averages with: its graph neighbors (a static graph), or everyone
  // (a graph that changes every round, and the allreduce family, which answers no one).
  const int n = config_.world.size, self = transport_->rank();
  std::vector<int> ask;
  if (is_gossip(config_.algorithm.name) && !topology::is_time_varying(config_.topology)) {
    const auto m = topology::rank_mixing(config_.topology, n, self, config_.run.seed, 0);
    ask = m.recv_from;
    ask.insert(ask.end(), m.send_to.begin(), m.send_to.end());
    std::sort(ask.begin(), ask.end());
    ask.erase(std::unique(ask.begin(), ask.end()), ask.end());
  } else {
    for (int r = 0; r < n; ++r) {
      if (r != self) ask.push_back(r);
    }
  }
  const auto how = is_allreduce_family(config_.algorithm.name) ? optimizers::JoinStep::kAgreed
                                                                : optimizers::JoinStep::kPerPair;
  return optimizers::rejoin(*transport_, *live_, ask, params_, step, how).step;
}

Distributed::~Distributed() = default;

FinalAverage Distributed::average(std::span<float> model) {
  std::span<float> mean = scratch_.flat();
  std::copy(model.begin(), model.end(), mean.begin());
  const auto options = collective_options(config_.transport);
  transport::RingAllreduce allreduce(*transport_, options);
  // Continue mode: over the ranks alive at the end, which the survivors agree on.
  constexpr std::int64_t kEnd = std::numeric_limits<std::int64_t>::max() / 2;
  std::unique_ptr<optimizers::LiveAllreduce> live;
  if (live_) live = std::make_unique<optimizers::LiveAllreduce>(*transport_, *live_, options);
  auto reduce = [&](std::span<float> data, transport::Tag tag) {
    if (live) {
      live->average(*scratch_region_, data, tag, kEnd);
    } else {
      allreduce.run(*scratch_region_, data, transport::ReduceOp::kAverage, tag);
    }
  };
  reduce(mean.first(model.size()), kAverageTag);
  double sq = 0;
  for (std::size_t i = 0; i < model.size(); ++i) {
    const double d = static_cast<double>(model[i]) - mean[i];
    sq += d * d;
  }
  // Mean of the distances over peers: one more (tiny) allreduce, reusing the scratch region's
  // first float after the model has been copied out.
  std::copy(mean.begin(), mean.begin() + static_cast<std::ptrdiff_t>(model.size()), model.begin());
  mean[0] = static_cast<float>(std::sqrt(sq));
  reduce(mean.first(1), kDistanceTag);
  FinalAverage out{static_cast<double>(mean[0]), {}};
  if (live_) {
    out.ranks = live_->live_ranks(kEnd);
  } else {
    for (int r = 0; r < transport_->world_size(); ++r) out.ranks.push_back(r);
  }
  return out;
}

}  // namespace murmur::runtime
