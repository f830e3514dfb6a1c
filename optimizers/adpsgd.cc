#include "optimizers/adpsgd.h"

#include <algorithm>
#include <numeric>

#include "core/rng.h"
#include "optimizers/mixing_ops.h"
#include "topology/schedule.h"

namespace murmur::optimizers {

int pairwise_partner(const topology::Graph& g, std::uint64_t seed, std::int64_t round, int rank) {
  const int n = g.n;
  std::vector<std::vector<int>> adj(n);
  for (int i = 0; i < n; ++i) {
    for (int j : g.out[i]) {
      adj[i].push_back(j);
      adj[j].push_back(i);
    }
  }
  Rng rng = Rng(seed ^ 0xAD95D0ull).fork(static_cast<std::uint64_t>(round));
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  for (int i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  std::vector<int> partner(n, -1);
  std::vector<int> free;
  for (int i : order) {
    if (partner[i] >= 0) continue;
    free.clear();
    for (int j : adj[i]) {
      if (j != i && partner[j] < 0) free.push_back(j);
    }
    if (free.empty()) continue;
    std::sort(free.begin(), free.end());
    free.erase(std::unique(free.begin(), free.end()), free.end());
    const int j = free[rng.below(free.size())];
    partner[i] = j;
    partner[j] = i;
  }
  return partner[rank];
}

Adpsgd::Adpsgd(const AveragingContext& ctx)
    : transport_(ctx.transport),
      params_(ctx.params),
      topology_(ctx.topology),
      seed_(ctx.seed),
      local_steps_(ctx.algorithm.local_steps),
      options_(collective_options(ctx.transport_config)),
      live_(ctx.live),
      snapshot_(ctx.params.size(), 0.0f),
      slots_(ctx.transport, ctx.params.size()),
      comm_(std::make_unique<CommThread>()) {
  snapshot_region_ = transport_.register_region(std::as_writable_bytes(std::span(snapshot_)));
  slots_.reserve(1);
}

Adpsgd::~Adpsgd() { comm_.reset(); }

void Adpsgd::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  const std::int64_t round = step / local_steps_ - 1;
  Stopwatch watch;
  apply_pending();
  const int n = transport_.world_size(), r = transport_.rank();
  partner_ = pairwise_partner(topology::graph_at(topology_, n, seed_, round), seed_, round, r);
  if (partner_ >= 0 && live_ && !live_->alive(partner_, step)) partner_ = -1;
  if (partner_ >= 0) {
    copy(snapshot_, params_);
    pending_ = true;
    const transport::Tag tag = p2p_tag(Purpose::kPairwise, round);
    comm_->start([this, tag] {
      const int peer[1] = {partner_};
      const transport::ByteRange all{0, params_.size_bytes()};
      if (live_) {
        got_ = exchange_live(transport_, tag, *snapshot_region_, all, peer, slots_, peer, *live_)[0];
      } else {
        exchange_into_slots(transport_, tag, *snapshot_region_, all, peer, slots_, peer, options_);
        got_ = true;
      }
    });
  }
  stats_.comm_s += watch.seconds();
}

void Adpsgd::apply_pending() {
  if (!pending_) return;
  stats_.wait_s += comm_->wait();
  pending_ = false;
  if (!got_) return;  // the partner was lost: this round is skipped
  // Lian et al. 2018, Algorithm 1, line 6: x_i, x_j <- (x_i + x_j) / 2 on the values read at
  // the exchange; the local step taken since is kept: x_i += (x_j' - x_i') / 2.
  add_scaled_diff(params_, 0.5f, slots_.slot(0), snapshot_);
}

void Adpsgd::flush() {
  Stopwatch watch;
  apply_pending();
  stats_.comm_s += watch.seconds();
}

}  // namespace murmur::optimizers
