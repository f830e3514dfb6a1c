#include "optimizers/rejoin.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "optimizers/comm_thread.h"
#include "optimizers/mixing_ops.h"
#include "transport/frame.h"

namespace murmur::optimizers {

namespace {
// The messages of a rejoin, all under Purpose::kJoin: the request, the answer's header (step,
// join step, agreement count), the answer's parameters, and (kAgreed) the commit (join step).
const transport::Tag kRequestTag = p2p_tag(Purpose::kJoin, 0);
const transport::Tag kHeaderTag = p2p_tag(Purpose::kJoin, 1);
const transport::Tag kParamsTag = p2p_tag(Purpose::kJoin, 2);
const transport::Tag kCommitTag = p2p_tag(Purpose::kJoin, 3);
constexpr std::size_t kHeaderBytes = 32;

std::int64_t load_i64(const std::byte* p) {
  return static_cast<std::int64_t>(transport::load_le<std::uint64_t>(p));
}
}  // namespace

JoinResponder::JoinResponder(transport::Transport& transport, LiveSet& live,
                             std::span<float> params, std::int64_t margin, JoinStep how)
    : how_(how), transport_(transport), live_(live), params_(params), margin_(margin) {
  header_region_ = transport_.register_region(header_);
}

JoinResponder::~JoinResponder() {
  // Posted receives and sends point into our buffers: give them up before the memory goes.
  for (auto* waiting : {&askers_, &committing_}) {
    for (auto& [rank, a] : *waiting) {
      if (a.pending.valid() && !a.pending.state()->done) transport_.cancel(a.pending);
    }
  }
  for (auto& q : sending_) {
    if (q.valid() && !q.state()->done) transport_.cancel(q);
  }
}

void JoinResponder::take_committed(std::int64_t clock) {
  for (auto it = committing_.begin(); it != committing_.end();) {
    const int r = it->first;
    Asker& c = it->second;
    bool done = false;
    try {
      done = transport_.test(c.pending);
    } catch (const TransportError&) {
      it = committing_.erase(it);  // gone again before it committed: it stays dead
      continue;
    }
    if (!done) {
      ++it;
      continue;
    }
    const std::int64_t join = load_i64(c.request.data());
    if (c.pending.state()->bytes == 8 && join > clock) {
      live_.revive(r, join);
    } else {
      log().warn("rank {}: rank {} committed to rejoin at {}, which this rank has passed ({}); "
                 "it stays out", transport_.rank(), r, join, clock);
    }
    it = committing_.erase(it);
  }
}

void JoinResponder::track_pace(std::int64_t clock) {
  const auto now = std::chrono::steady_clock::now();
  if (window_clock_ < 0) {
    window_clock_ = clock;
    window_start_ = now;
    return;
  }
  const double seconds = std::chrono::duration<double>(now - window_start_).count();
  if (seconds < 0.5) return;
  fastest_pace_ = std::max(fastest_pace_, static_cast<double>(clock - window_clock_) / seconds);
  window_clock_ = clock;
  window_start_ = now;
}

void JoinResponder::poll(std::int64_t step, std::int64_t clock) {
  if (how_ == JoinStep::kAgreed) track_pace(clock);
  if (!committing_.empty()) take_committed(clock);
  std::vector<int> joining;
  for (int r : live_.dead_ranks()) {
    if (committing_.count(r) != 0) continue;  // answered; its commit is on the way
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
  const std::int64_t join_step = clock + margin_;
  transport::store_le<std::uint64_t>(header_.data(), static_cast<std::uint64_t>(step));
  transport::store_le<std::uint64_t>(header_.data() + 8, static_cast<std::uint64_t>(join_step));
  transport::store_le<std::uint64_t>(header_.data() + 16, live_.agreements());
  transport::store_le<std::uint64_t>(header_.data() + 24,
                                     static_cast<std::uint64_t>(fastest_pace_ * 1000.0));
  if (copy_.size() != params_.size()) {
    copy_.assign(params_.size(), 0.0f);
    copy_region_ = transport_.register_region(std::as_writable_bytes(std::span(copy_)));
  }
  copy(copy_, params_);
  for (int r : joining) {
    sending_.push_back(transport_.send(r, kHeaderTag, *header_region_, {0, header_.size()}));
    sending_.push_back(
        transport_.send(r, kParamsTag, *copy_region_, {0, copy_.size() * sizeof(float)}));
    if (how_ == JoinStep::kPerPair) {
      live_.revive(r, join_step);
      continue;
    }
    Asker& c = committing_[r];
    c.request_region = transport_.register_region(c.request);
    c.pending = transport_.recv(r, kCommitTag, *c.request_region, {0, 8});
  }
}

RejoinResult rejoin(transport::Transport& transport, LiveSet& live, std::span<const int> ranks,
                    std::span<float> params, std::int64_t step, JoinStep how) {
  const std::size_t n = params.size(), m = ranks.size();
  std::array<std::byte, 8> request;
  transport::store_le<std::uint64_t>(request.data(), static_cast<std::uint64_t>(step));
  std::vector<std::byte> headers(kHeaderBytes * std::max<std::size_t>(1, m));
  std::vector<float> theirs(n * std::max<std::size_t>(1, m));
  auto request_region = transport.register_region(request);
  auto header_region = transport.register_region(headers);
  auto params_region = transport.register_region(std::as_writable_bytes(std::span(theirs)));
  std::array<std::byte, 8> commit{};  // kAgreed: the join step every answerer takes us back at
  auto commit_region = transport.register_region(commit);
  std::vector<transport::Request> heads, bodies, sends, commits;
  transport::CancelOnUnwind guard(transport);
  guard.watch(heads);
  guard.watch(bodies);
  guard.watch(sends);
  guard.watch(commits);
  for (std::size_t k = 0; k < m; ++k) {
    heads.push_back(
        transport.recv(ranks[k], kHeaderTag, *header_region, {kHeaderBytes * k, kHeaderBytes}));
    bodies.push_back(transport.recv(ranks[k], kParamsTag, *params_region,
                                    {k * n * sizeof(float), n * sizeof(float)}));
    sends.push_back(transport.send(ranks[k], kRequestTag, *request_region, {0, 8}));
  }
  const auto asked = std::chrono::steady_clock::now();
  // One deadline for every answer. A live neighbor notices the request at its next step, but that
  // step may be held up by a chain of waits: a neighbor that has already taken us back waits for
  // our first exchange at its join step, its other neighbors wait for it, and so on around the
  // graph, each wait bounded by the peer timeout. Giving up sooner dropped a live neighbor that
  // was about to answer, and the views of who is alive then fell apart (seen in tests).
  // kAgreed: the survivors of the death that restarted us may still be agreeing on their ring
  // (each agreement bounded by the peer timeout, a few in a row): three times as long.
  const auto patience = live.peer_timeout() * std::max(2, transport.world_size()) *
                        (how == JoinStep::kAgreed ? 3 : 1);
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
  std::vector<double> paces;  // kAgreed: each answerer's fastest rounds per second
  for (std::size_t k = 0; k < m; ++k) {
    if (!arrived(heads[k], kHeaderBytes, deadline) ||
        !arrived(bodies[k], n * sizeof(float), std::max(deadline, transport::deadline_after(live.peer_timeout())))) {
      live.mark_dead(ranks[k], "did not answer this peer's request to rejoin");
      continue;
    }
    const std::byte* header = headers.data() + kHeaderBytes * k;
    const std::int64_t their_step = load_i64(header), join_step = load_i64(header + 8);
    if (their_step < 0 || join_step < 0) {
      live.mark_dead(ranks[k], "answered this peer's request to rejoin with a negative step");
      continue;
    }
    result.step = std::max(result.step, their_step);
    live.adopt_agreements(transport::load_le<std::uint64_t>(header + 16));
    paces.push_back(static_cast<double>(transport::load_le<std::uint64_t>(header + 24)) / 1000.0);
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
  if (how == JoinStep::kAgreed) {
    // One join step for all, which no answerer has passed when the commit arrives: each proposed
    // a margin ahead of where it was when it answered, and has run at most its fastest pace since
    // we asked (before it answered); a second more covers the commit's way there.
    const double since_asked =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count() + 1.0;
    std::int64_t agreed = 0;
    for (std::size_t k = 0; k < revive.size(); ++k) {
      const auto ahead = static_cast<std::int64_t>(paces[k] * since_asked) + 1;
      agreed = std::max(agreed, revive[k].second + ahead);
    }
    transport::store_le<std::uint64_t>(commit.data(), static_cast<std::uint64_t>(agreed));
    for (const auto& [r, j] : revive) commits.push_back(transport.send(r, kCommitTag, *commit_region, {0, 8}));
    const auto commit_deadline = transport::deadline_after(live.peer_timeout());
    auto sent = [&](transport::Request& q) {
      try {
        if (transport.wait(q, commit_deadline)) return true;
      } catch (const TransportError&) {
      }
      if (!q.state()->done) transport.cancel(q);
      return false;
    };
    for (std::size_t k = 0; k < revive.size(); ++k) {
      if (!sent(commits[k])) {
        live.mark_dead(revive[k].first, "did not take this peer's commit to rejoin");
        revive[k].second = -1;
      }
    }
    for (auto& [r, j] : revive) {
      if (j >= 0) j = agreed;
    }
  }
  for (const auto& [r, j] : revive) {
    if (j >= 0) live.revive(r, j);
  }
  log().info("rank {}: rejoined at step {}: parameters from {} live neighbor(s)",
             transport.rank(), result.step, result.answers);
  return result;
}

}  // namespace murmur::optimizers
