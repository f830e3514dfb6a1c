#include "runtime/distributed.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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
      scratch_region_(transport_->register_region(scratch_.bytes())) {
  optimizers::AveragingContext ctx{config.algorithm,  config.topology, config.transport,
                                   *transport_,       *params_region_, params.flat(),
                                   config.run.seed};
  averaging_ = optimizers::make_averaging(ctx);
}

Distributed::~Distributed() = default;

FinalAverage Distributed::average(std::span<float> model) {
  std::span<float> mean = scratch_.flat();
  std::copy(model.begin(), model.end(), mean.begin());
  const auto options = collective_options(config_.transport);
  transport::RingAllreduce allreduce(*transport_, options);
  allreduce.run(*scratch_region_, mean.first(model.size()), transport::ReduceOp::kAverage,
                kAverageTag);
  double sq = 0;
  for (std::size_t i = 0; i < model.size(); ++i) {
    const double d = static_cast<double>(model[i]) - mean[i];
    sq += d * d;
  }
  // Mean of the distances over peers: one more (tiny) allreduce, reusing the scratch region's
  // first float after the model has been copied out.
  std::copy(mean.begin(), mean.begin() + static_cast<std::ptrdiff_t>(model.size()), model.begin());
  mean[0] = static_cast<float>(std::sqrt(sq));
  allreduce.run(*scratch_region_, mean.first(1), transport::ReduceOp::kAverage, kDistanceTag);
  return {static_cast<double>(mean[0])};
}

}  // namespace murmur::runtime
