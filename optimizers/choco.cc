#include "optimizers/choco.h"

#include "optimizers/mixing_ops.h"
#include "topology/mixing.h"

namespace murmur::optimizers {

namespace {
std::size_t floats_for(std::size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }
}  // namespace

Choco::Choco(const AveragingContext& ctx)
    : transport_(ctx.transport),
      params_(ctx.params),
      local_steps_(ctx.algorithm.local_steps),
      gamma_(static_cast<float>(ctx.algorithm.consensus_lr)),
      options_(collective_options(ctx.transport_config)),
      mixing_(topology::rank_mixing(ctx.topology, ctx.transport.world_size(), ctx.transport.rank(),
                                    ctx.seed, 0)),
      compressor_(make_compressor(ctx.algorithm.compressor)),
      contraction_(static_cast<float>(compressor_->contraction_scale(ctx.params.size()))),
      rng_(Rng(ctx.seed ^ 0xC0C0ull).fork(static_cast<std::uint64_t>(ctx.transport.rank()))),
      xhat_(ctx.params.size(), 0.0f),
      s_(ctx.params.size(), 0.0f),
      diff_(ctx.params.size(), 0.0f),
      send_(compressor_->max_bytes(ctx.params.size())),
      slots_(ctx.transport, floats_for(send_.size())) {
  send_region_ = transport_.register_region(send_);
  slots_.reserve(std::max<std::size_t>(1, mixing_.recv_from.size()));
}

void Choco::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  const std::int64_t round = step / local_steps_ - 1;
  Stopwatch watch;
  // Koloskova et al. 2019, Algorithm 2 (CHOCO-SGD), lines 4-9, after the local step (line 3):
  // q_i = Q(x_i - x^_i); send q_i, receive q_j; x^_j += q_j for j in N_i and i itself
  // (kept here as s_i = sum_j W_ij x^_j); x_i += gamma (s_i - x^_i).
  add_scaled_diff(diff_, 1.0f, params_, xhat_);  // diff_ is 0 on entry: diff_ = x - x^
  const std::size_t bytes = compressor_->encode(diff_, send_, rng_);
  std::fill(diff_.begin(), diff_.end(), 0.0f);
  Stopwatch blocked;
  const auto got = exchange_into_slots(transport_, p2p_tag(Purpose::kChoco, round), *send_region_,
                                       {0, bytes}, mixing_.send_to, slots_, mixing_.recv_from,
                                       options_, /*exact_size=*/false);
  stats_.wait_s += blocked.seconds();
  const std::span<const std::byte> own(send_.data(), bytes);
  compressor_->decode_add(own, contraction_, xhat_);
  compressor_->decode_add(own, contraction_ * static_cast<float>(mixing_.self_weight), s_);
  for (std::size_t k = 0; k < got.size(); ++k) {
    const auto slot = std::as_bytes(slots_.slot(k)).first(got[k]);
    compressor_->decode_add(slot, contraction_ * static_cast<float>(mixing_.recv_weights[k]), s_);
  }
  add_scaled_diff(params_, gamma_, s_, xhat_);
  stats_.comm_s += watch.seconds();
}

std::vector<std::pair<std::string, std::span<float>>> Choco::state() {
  return {{"choco.xhat", xhat_}, {"choco.s", s_}};
}

}  // namespace murmur::optimizers
