#include "optimizers/rejoin.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "optimizers/comm_thread.h"
#include "optimizers/mixing_ops.h"
#include "transport/frame.h"

namespace murmur::optimizers {

namespace {
// The three messages of a rejoin, all under Purpose::kJoin: the request, the answer's header
// (step, join step) and the answer's parameters.
const transport::Tag kRequestTag = p2p_tag(Purpose::kJoin, 0);
const transport::Tag kHeaderTag = p2p_tag(Purpose::kJoin, 1);
const transport::Tag kParamsTag = p2p_tag(Purpose::kJoin, 2);
}  // namespace

JoinResponder::JoinResponder(transport::Transport& transport, LiveSet& live,
                             std::span<float> params, std::int64_t margin)
    : transport_(transport), live_(live), params_(params), margin_(margin) {
  header_region_ = transport_.register_region(header_);
}

JoinResponder::~JoinResponder() {
  // Posted receives and sends point into our buffers: give them up before the memory goes.
  for (auto& [rank, a] : askers_) {
    if (a.pending.valid() && !a.pending.state()->done) transport_.cancel(a.pending);
  }
  for (auto& q : sending_) {
    if (q.valid() && !q.state()->done) transport_.cancel(q);
  }
}

void JoinResponder::poll(std::int64_t step) {
  std::vector<int> joining;
  for (int r : live_.dead_ranks()) {
    Asker& a = askers_[r];
    if (!a.request_region) a.request_region = transport_.register_region(a.request);
    if (!a.pending.valid()) a.pending = transport_.recv(r, kRequestTag, *a.request_region, {0, 8});
    bool done = false;
    try {
      done = transport_.test(a.pending);
    } catch (const TransportError&) {
      a.pending = {};  // still gone: ask again after the next step
      continue;
    }
    if (!done) continue;
    a.pending = {};
    joining.push_back(r);
  }
  if (joining.empty()) return;
  // The buffers of the last answer must have left before they are overwritten.
  for (auto& q : sending_) wait_live(transport_, q, live_, "a rejoin answer");
  sending_.clear();
  const std::int64_t join_step = step + margin_;
  transport::store_le<std::uint64_t>(header_.data(), static_cast<std::uint64_t>(step));
  transport::store_le<std::uint64_t>(header_.data() + 8, static_cast<std::uint64_t>(join_step));
  if (copy_.size() != params_.size()) {
    copy_.assign(params_.size(), 0.0f);
    copy_region_ = transport_.register_region(std::as_writable_bytes(std::span(copy_)));
  }
  copy(copy_, params_);
  for (int r : joining) {
    sending_.push_back(transport_.send(r, kHeaderTag, *header_region_, {0, header_.size()}));
    sending_.push_back(
        transport_.send(r, kParamsTag, *copy_region_, {0, copy_.size() * sizeof(float)}));
    live_.revive(r, join_step);
  }
}

RejoinResult rejoin(transport::Transport& transport, LiveSet& live, std::span<const int> ranks,
                    std::span<float> params, std::int64_t step) {
  const std::size_t n = params.size(), m = ranks.size();
  std::array<std::byte, 8> request;
  transport::store_le<std::uint64_t>(request.data(), static_cast<std::uint64_t>(step));
  std::vector<std::byte> headers(16 * std::max<std::size_t>(1, m));
  std::vector<float> theirs(n * std::max<std::size_t>(1, m));
  auto request_region = transport.register_region(request);
  auto header_region = transport.register_region(headers);
  auto params_region = transport.register_region(std::as_writable_bytes(std::span(theirs)));
  std::vector<transport::Request> heads, bodies, sends;
  transport::CancelOnUnwind guard(transport);
  guard.watch(heads);
  guard.watch(bodies);
  guard.watch(sends);
  for (std::size_t k = 0; k < m; ++k) {
    heads.push_back(transport.recv(ranks[k], kHeaderTag, *header_region, {16 * k, 16}));
    bodies.push_back(transport.recv(ranks[k], kParamsTag, *params_region,
                                    {k * n * sizeof(float), n * sizeof(float)}));
    sends.push_back(transport.send(ranks[k], kRequestTag, *request_region, {0, 8}));
  }
  // One deadline for every answer. A live neighbor notices the request at its next step, but that
  // step may be held up by a chain of waits: a neighbor that has already taken us back waits for
  // our first exchange at its join step, its other neighbors wait for it, and so on around the
  // graph, each wait bounded by the peer timeout. Giving up sooner dropped a live neighbor that
  // was about to answer, and the views of who is alive then fell apart (seen in tests).
  const auto patience = live.peer_timeout() * std::max(2, transport.world_size());
  const auto deadline = transport::deadline_after(patience);
  auto arrived = [&](transport::Request& q, std::size_t bytes, transport::Deadline until) {
    try {
      if (transport.wait(q, until) && q.state()->bytes == bytes) return true;
    } catch (const TransportError&) {
    }
    if (!q.state()->done) transport.cancel(q);
    return false;
  };
  RejoinResult result;
  std::vector<const float*> inputs;
  std::vector<std::pair<int, std::int64_t>> revive;
  for (std::size_t k = 0; k < m; ++k) {
    if (!arrived(heads[k], 16, deadline) ||
        !arrived(bodies[k], n * sizeof(float), std::max(deadline, transport::deadline_after(live.peer_timeout())))) {
      live.mark_dead(ranks[k], "did not answer this peer's request to rejoin");
      continue;
    }
    const auto their_step = static_cast<std::int64_t>(transport::load_le<std::uint64_t>(headers.data() + 16 * k));
    const auto join_step = static_cast<std::int64_t>(transport::load_le<std::uint64_t>(headers.data() + 16 * k + 8));
    result.step = std::max(result.step, their_step);
    inputs.push_back(theirs.data() + k * n);
    revive.emplace_back(ranks[k], join_step);
  }
  for (auto& s : sends) {
    if (!s.state()->done) transport.cancel(s);
  }
  result.answers = static_cast<int>(inputs.size());
  if (inputs.empty()) {
    result.step = step;
    return result;
  }
  const std::vector<float> weights(inputs.size(), 1.0f / static_cast<float>(inputs.size()));
  mix(params, 0.0f, inputs, weights);
  for (const auto& [r, j] : revive) live.revive(r, j);
  log().info("rank {}: rejoined at step {}: parameters from {} live neighbor(s)",
             transport.rank(), result.step, result.answers);
  return result;
}

}  // namespace murmur::optimizers
