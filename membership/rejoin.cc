#include "membership/rejoin.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "membership/neighborhood.h"
#include "transport/collectives.h"
#include "transport/tag.h"

namespace murmur::membership {

namespace {
// The messages of a rejoin, all under purpose kJoin, told apart by the round field: the request,
// the answer, the answer's parameters, and (kAgreed) the commit.
enum JoinRound : std::int64_t { kRequest = 0, kAnswer = 1, kParams = 2, kCommit = 3 };

transport::Tag join_tag(const transport::Transport& t, JoinRound what) {
  return transport::TagLayout(t).make(transport::purpose::kJoin, what);
}

double seconds(std::chrono::milliseconds ms) { return std::chrono::duration<double>(ms).count(); }
}  // namespace

JoinResponder::JoinResponder(transport::Transport& transport, LiveSet& live, std::size_t floats,
                             std::function<void(std::span<float>)> snapshot, std::int64_t drift,
                             JoinStep how)
    : transport_(transport),
      live_(live),
      snapshot_(std::move(snapshot)),
      drift_(drift),
      how_(how),
      copy_(floats, 0.0f) {
  answer_region_ = transport_.register_region(answer_);
  copy_region_ = transport_.register_region(std::as_writable_bytes(std::span(copy_)));
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

bool JoinResponder::listen(int r) {
  Asker& a = askers_[r];
  if (!a.region) a.region = transport_.register_region(a.message);
  try {
    // Posting may fail at once too (ucx refuses a receive from a rank it has lost).
    if (!a.pending.valid()) {
      a.pending = transport_.recv(r, join_tag(transport_, kRequest), *a.region, {0, JoinRequest::kBytes});
    }
    return transport_.test(a.pending);
  } catch (const PeerLost& e) {
    // The transport saw its process go (ucx and ofi watch every rank, not only our neighbors):
    // so does membership. Until it does, a new process of that rank could not be heard (its
    // requests fail with the old loss until the runtime drops the old one).
    a.pending = {};
    if (!live_.dead(r)) live_.mark_dead(r, e.what());
    return false;
  } catch (const TransportError&) {
    a.pending = {};  // still gone: listen again next time
    return false;
  }
}

bool JoinResponder::restarted(int r) {
  if (r == live_.rank() || r < 0 || r >= live_.world_size() || committing_.count(r) != 0) return false;
  return listen(r);
}

std::int64_t JoinResponder::margin() const {
  return drift_ + static_cast<std::int64_t>(std::ceil(fastest_pace_ * seconds(live_.peer_timeout())));
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
    try {
      const JoinCommit commit =
          JoinCommit::decode(std::span(c.message).first(c.pending.state()->bytes));
      if (commit.join_step > clock) {
        live_.revive(r, commit.join_step);
      } else {
        log().warn("rank {}: rank {} committed to rejoin at {}, which this rank has passed ({}); "
                   "it stays out", transport_.rank(), r, commit.join_step, clock);
      }
    } catch (const ProtocolError& e) {
      log().warn("rank {}: rank {} sent a bad commit to rejoin ({}); it stays out",
                 transport_.rank(), r, e.what());
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
  const double s = std::chrono::duration<double>(now - window_start_).count();
  if (s < 0.5) return;
  fastest_pace_ = std::max(fastest_pace_, static_cast<double>(clock - window_clock_) / s);
  window_clock_ = clock;
  window_start_ = now;
}

void JoinResponder::poll(std::int64_t step, std::int64_t clock) {
  track_pace(clock);
  if (!committing_.empty()) take_committed(clock);
  std::vector<std::pair<int, bool>> joining;  // (rank, wants our parameters)
  // A request is listened for from every rank, the live ones too: a peer restarted before this
  // one saw its old process die asks while it still counts as alive here.
  for (int r = 0; r < live_.world_size(); ++r) {
    if (r == live_.rank() || committing_.count(r) != 0) continue;  // answered: commit on its way
    if (!listen(r)) continue;
    Asker& a = askers_[r];
    const std::size_t bytes = a.pending.state()->bytes;
    JoinRequest request;
    try {
      request = JoinRequest::decode(std::span(a.message).first(bytes));
    } catch (const ProtocolError& e) {
      a.pending = {};
      log().warn("rank {}: rank {} sent a bad request to rejoin ({}); ignored", transport_.rank(),
                 r, e.what());
      continue;
    }
    // Its old process is gone; the connection is the new one's, which restarted() keeps open.
    if (!live_.dead(r)) live_.mark_dead(r, "it was restarted, and asks to rejoin");
    a.pending = {};
    joining.push_back({r, request.wants_params});
  }
  if (joining.empty()) return;
  // The buffers of the last answer must have left before they are overwritten.
  for (auto& q : sending_) wait_live(transport_, q, live_, "a rejoin answer");
  sending_.clear();
  const JoinAnswer answer{step, clock + margin(), live_.agreements(), fastest_pace_};
  answer_ = answer.encode();
  snapshot_(copy_);
  for (const auto& [r, wants_params] : joining) {
    sending_.push_back(transport_.send(r, join_tag(transport_, kAnswer), *answer_region_,
                                       {0, answer_.size()}));
    if (wants_params) {
      sending_.push_back(transport_.send(r, join_tag(transport_, kParams), *copy_region_,
                                         {0, copy_.size() * sizeof(float)}));
    }
    if (how_ == JoinStep::kPerPair) {
      live_.revive(r, answer.join_step);
      continue;
    }
    Asker& c = committing_[r];
    c.region = transport_.register_region(c.message);
    c.pending = transport_.recv(r, join_tag(transport_, kCommit), *c.region, {0, JoinCommit::kBytes});
  }
}

RejoinResult rejoin(transport::Transport& transport, LiveSet& live, std::span<const int> ranks,
                    std::span<float> params, std::int64_t step, JoinStep how,
                    std::span<const int> also_tell) {
  const std::size_t n = params.size(), m = ranks.size(), told = also_tell.size();
  auto request = JoinRequest{step, true}.encode();
  auto notice = JoinRequest{step, false}.encode();
  std::vector<std::byte> answers(JoinAnswer::kBytes * std::max<std::size_t>(1, m));
  std::vector<float> theirs(n * std::max<std::size_t>(1, m));
  std::vector<std::byte> told_answers(JoinAnswer::kBytes * std::max<std::size_t>(1, told));
  auto request_region = transport.register_region(request);
  auto notice_region = transport.register_region(notice);
  auto told_region = transport.register_region(told_answers);
  auto answer_region = transport.register_region(answers);
  auto params_region = transport.register_region(std::as_writable_bytes(std::span(theirs)));
  std::array<std::byte, JoinCommit::kBytes> commit{};
  auto commit_region = transport.register_region(commit);
  std::vector<transport::Request> heads, bodies, sends, commits, told_heads;
  transport::CancelOnUnwind guard(transport);
  guard.watch(told_heads);
  guard.watch(heads);
  guard.watch(bodies);
  guard.watch(sends);
  guard.watch(commits);
  for (std::size_t k = 0; k < m; ++k) {
    heads.push_back(transport.recv(ranks[k], join_tag(transport, kAnswer), *answer_region,
                                   {JoinAnswer::kBytes * k, JoinAnswer::kBytes}));
    bodies.push_back(transport.recv(ranks[k], join_tag(transport, kParams), *params_region,
                                    {k * n * sizeof(float), n * sizeof(float)}));
    sends.push_back(transport.send(ranks[k], join_tag(transport, kRequest), *request_region,
                                   {0, request.size()}));
  }
  for (std::size_t k = 0; k < told; ++k) {
    told_heads.push_back(transport.recv(also_tell[k], join_tag(transport, kAnswer), *told_region,
                                        {JoinAnswer::kBytes * k, JoinAnswer::kBytes}));
    sends.push_back(transport.send(also_tell[k], join_tag(transport, kRequest), *notice_region,
                                   {0, notice.size()}));
  }
  const auto asked = std::chrono::steady_clock::now();
  // One deadline for every answer. A live neighbor notices the request at its next step, but that
  // step may be held up by a chain of waits: a neighbor that has already taken us back waits for
  // our first exchange at its join step, its other neighbors wait for it, and so on around the
  // graph, each wait bounded by the peer timeout. kAgreed: the survivors of the death that
  // restarted us may still be agreeing on their ring (each agreement bounded by the peer timeout,
  // a few in a row): three times as long.
  const auto patience = live.peer_timeout() * std::max(2, transport.world_size()) *
                        (how == JoinStep::kAgreed ? 3 : 1);
  const auto deadline = transport::deadline_after(patience);
  // Why the last answer that did not arrive failed, for the log: the transport's word if it
  // had one (a refused connection, a rank that has left the run).
  std::string failure;
  auto arrived = [&](transport::Request& q, std::size_t bytes, transport::Deadline until) {
    failure.clear();
    try {
      if (transport.wait(q, until)) {
        if (q.state()->bytes == bytes) return true;
        failure = fmt::format("{} bytes, expected {}", q.state()->bytes, bytes);
      }
    } catch (const TransportError& e) {
      failure = e.what();
    }
    if (!q.state()->done) transport.cancel(q);
    return false;
  };
  auto silent = [&] {
    return failure.empty() ? std::string("did not answer this peer's request to rejoin")
                           : fmt::format("did not answer this peer's request to rejoin: {}", failure);
  };
  RejoinResult result;
  std::vector<const float*> inputs;
  std::vector<std::pair<int, std::int64_t>> revive;
  std::vector<double> paces;  // kAgreed: each answerer's fastest rounds per second
  // Takes rank r back on its answer (the bytes at `at`); false if the answer is bad.
  auto take = [&](int r, std::span<const std::byte> at) {
    JoinAnswer answer;
    try {
      answer = JoinAnswer::decode(at);
    } catch (const ProtocolError& e) {
      live.mark_dead(r, fmt::format("answered this peer's request to rejoin badly: {}", e.what()));
      return false;
    }
    result.step = std::max(result.step, answer.step);
    live.adopt_agreements(answer.agreements);
    paces.push_back(answer.pace);
    revive.emplace_back(r, answer.join_step);
    return true;
  };
  for (std::size_t k = 0; k < m; ++k) {
    if (!arrived(heads[k], JoinAnswer::kBytes, deadline) ||
        !arrived(bodies[k], n * sizeof(float),
                 std::max(deadline, transport::deadline_after(live.peer_timeout())))) {
      live.mark_dead(ranks[k], silent());
      continue;
    }
    if (take(ranks[k], std::span(answers).subspan(JoinAnswer::kBytes * k, JoinAnswer::kBytes))) {
      inputs.push_back(theirs.data() + k * n);
    }
  }
  // The others only take us back (the final average and the agreements count us again); their
  // steps count as the neighbors' do, so that we end with the run.
  int taken_back = 0;
  for (std::size_t k = 0; k < told; ++k) {
    if (!arrived(told_heads[k], JoinAnswer::kBytes, deadline)) {
      live.mark_dead(also_tell[k], silent());
      continue;
    }
    if (take(also_tell[k],
             std::span(told_answers).subspan(JoinAnswer::kBytes * k, JoinAnswer::kBytes))) {
      ++taken_back;
    }
  }
  for (auto& s : sends) {
    if (!s.state()->done) transport.cancel(s);
  }
  result.models = static_cast<int>(inputs.size());
  result.answers = result.models + taken_back;
  if (result.answers == 0) {
    result.step = step;
    return result;
  }
  // The mean of the answers, summed in double in a fixed order.
  for (std::size_t i = 0; i < n && !inputs.empty(); ++i) {
    double sum = 0;
    for (const float* in : inputs) sum += in[i];
    params[i] = static_cast<float>(sum / static_cast<double>(inputs.size()));
  }
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
    commit = JoinCommit{agreed}.encode();
    for (const auto& [r, j] : revive) {
      commits.push_back(transport.send(r, join_tag(transport, kCommit), *commit_region, {0, commit.size()}));
    }
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
  std::int64_t joined = -1;  // kAgreed: every j left is the agreed step
  for (const auto& [r, j] : revive) {
    if (j < 0) continue;
    live.revive(r, j);
    joined = j;
  }
  if (how == JoinStep::kAgreed && joined >= 0) live.rejoined_from(joined);
  log().info("rank {}: rejoined at step {}: parameters from {} live neighbor(s){}",
             transport.rank(), result.step, result.models,
             taken_back > 0 ? fmt::format("; {} other rank(s) took it back", taken_back) : "");
  return result;
}

}  // namespace murmur::membership
