#include "optimizers/adpsgd.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "core/rng.h"
#include "core/stopwatch.h"
#include "optimizers/adpsgd_wire.h"
#include "optimizers/comm_thread.h"
#include "topology/schedule.h"
#include "transport/tag.h"

namespace murmur::optimizers {
namespace {

namespace wire = adpsgd_wire;
using transport::Request;

constexpr std::string_view kKeys[] = {"local_steps"};
// How many refusals and losses are logged one by one (the rest only counted).
constexpr std::uint64_t kLoggedFaults = 8;

std::span<std::byte> bytes_of(std::vector<float>& v) { return std::as_writable_bytes(std::span(v)); }

// What both sides share: the buffers' layout, the tags, the count of exchanges.
class AsyncBase : public Averaging {
 public:
  // `partners`: this rank's neighbors of the other colour (split_roles).
  AsyncBase(const AveragingContext& ctx, bool initiator, std::vector<int> partners)
      : hood_(ctx.hood),
        t_(ctx.hood.transport()),
        params_(ctx.params),
        purpose_(ctx.purpose),
        layout_(ctx.hood.transport()),
        peer_timeout_(ctx.transport_config.peer_timeout_ms),
        partners_(std::move(partners)) {
    if (!ctx.device.host_memory()) {
      throw ConfigError("algorithm.name=adpsgd runs on host memory (run.device: cpu): its "
                        "responder averages on a thread of its own while the step computes");
    }
    report_.initiator = initiator;
    report_.staleness.assign(kStalenessBuckets, 0);
  }

  std::optional<ExchangeReport> exchange_report() const override {
    std::lock_guard lock(report_mutex_);
    return report_;
  }

 protected:
  std::size_t floats() const { return params_.size(); }
  std::size_t message_bytes() const { return wire::kHeaderBytes + params_.size_bytes(); }
  // A message buffer: the header's floats, then a model.
  std::vector<float> message() const { return std::vector<float>(wire::kHeaderFloats + floats()); }
  static std::span<float> model_of(std::vector<float>& m) {
    return std::span(m).subspan(wire::kHeaderFloats);
  }
  transport::Tag tag(std::uint64_t sequence, bool reply) const {
    return layout_.make(purpose_, static_cast<std::int64_t>(sequence), reply ? 1 : 0);  // wraps
  }

  void count_exchange(int partner, std::uint64_t sequence, std::int64_t mine, std::int64_t theirs) {
    const auto apart = static_cast<std::uint64_t>(mine > theirs ? mine - theirs : theirs - mine);
    std::lock_guard lock(report_mutex_);
    ++report_.exchanges;
    if (report_.trace.size() < kTracedExchanges) report_.trace.push_back({partner, sequence, mine, theirs});
    ++report_.staleness[std::min<std::uint64_t>(apart, kStalenessBuckets - 1)];
  }
  void count_lost(int partner, const char* when) {
    if (count_fault(&ExchangeReport::lost)) {
      log().warn("rank {}: adpsgd: rank {} was lost {}; this peer's model is left as it was "
                 "before that exchange", t_.rank(), partner, when);
    }
  }
  void count_refused(const std::string& why) {
    if (count_fault(&ExchangeReport::refused)) log().warn("rank {}: adpsgd: refused {}", t_.rank(), why);
  }

  membership::Neighborhood& hood_;
  transport::Transport& t_;
  std::span<float> params_;
  unsigned purpose_;
  transport::TagLayout layout_;
  std::chrono::milliseconds peer_timeout_;
  std::vector<int> partners_;  // the other colour's neighbors

 private:
  // Counts one more in `field`; true while few enough have been counted to log each one.
  bool count_fault(std::uint64_t ExchangeReport::*field) {
    std::lock_guard lock(report_mutex_);
    return ++(report_.*field) <= kLoggedFaults;
  }

  mutable std::mutex report_mutex_;
  ExchangeReport report_;
};

// Starts every exchange; never asked for one. Its parameters are written by its training thread
// only: the comm thread works on a snapshot and the reply, and the average lands at a later step.
class ActivePeer final : public AsyncBase {
 public:
  ActivePeer(const AveragingContext& ctx, std::vector<int> partners)
      : AsyncBase(ctx, /*initiator=*/true, std::move(partners)),
        local_steps_(ctx.algorithm.local_steps),
        rng_(Rng(ctx.seed ^ 0xAD95D1ull).fork(static_cast<std::uint64_t>(t_.rank()))),
        out_(message()),
        in_(message()),
        sent_(static_cast<std::size_t>(t_.world_size()), 0) {
    out_region_ = t_.register_region(bytes_of(out_));
    in_region_ = t_.register_region(bytes_of(in_));
  }
  ~ActivePeer() override { comm_.reset(); }

  void after_step(std::int64_t step) override {
    Stopwatch watch;
    last_step_ = step;
    if (pending_ && !comm_->busy()) complete();
    if (!pending_ && step % local_steps_ == 0) start(step);
    stats_.comm_s += watch.seconds();
  }

  void flush() override {
    Stopwatch watch;
    if (pending_) complete();
    stats_.comm_s += watch.seconds();
  }

  void finish() override {
    flush();
    // Goodbyes, so that each passive neighbor stops waiting for this peer's requests.
    for (const int k : partners_) {
      if (!hood_.alive(k, last_step_)) continue;
      const std::uint64_t seq = sent_[static_cast<std::size_t>(k)]++;
      wire::seal(bytes_of(out_), {wire::Kind::kBye, t_.rank(), 0, seq, last_step_}, {});
      Request send = t_.send(k, tag(seq, false), *out_region_, {0, wire::kHeaderBytes});
      hood_.wait(send, "an adpsgd goodbye");
    }
  }

  bool in_flight() const override { return pending_; }

 private:
  enum class Outcome { kAveraged, kRefused, kLost };

  void start(std::int64_t step) {
    std::vector<int> alive;
    for (const int k : partners_) {
      if (hood_.alive(k, step)) alive.push_back(k);
    }
    if (alive.empty()) return;
    partner_ = alive[rng_.below(alive.size())];
    start_step_ = step;
    const std::uint64_t seq = sent_[static_cast<std::size_t>(partner_)]++;
    sequence_ = seq;
    std::copy(params_.begin(), params_.end(), model_of(out_).begin());
    wire::seal(bytes_of(out_), {wire::Kind::kRequest, t_.rank(), 0, seq, step}, model_of(out_));
    pending_ = true;
    comm_->start([this, seq] { exchange(seq); });
  }

  // On the comm thread: the request, then the reply, checked.
  void exchange(std::uint64_t seq) {
    const int k = partner_;
    Request recv = t_.recv(k, tag(seq, true), *in_region_, {0, message_bytes()});
    Request send = t_.send(k, tag(seq, false), *out_region_, {0, message_bytes()});
    if (!hood_.wait(send, "an adpsgd request")) {
      t_.cancel(recv);
      outcome_ = Outcome::kLost;
      return;
    }
    if (!hood_.wait(recv, "an adpsgd reply")) {
      outcome_ = Outcome::kLost;
      return;
    }
    std::string why;
    const auto h = wire::check(bytes_of(in_), recv.state()->bytes, {k, seq, floats(), true}, why);
    if (!h) throw ProtocolError(fmt::format("rank {}: adpsgd: {}", t_.rank(), why));
    outcome_ = h->kind == wire::Kind::kReply ? Outcome::kAveraged : Outcome::kRefused;
    their_step_ = h->step;
  }

  // On the training thread, once the comm thread is done: x_i += (x_j - x_i') / 2, x_i' the
  // snapshot sent, so the local steps taken since are kept (Lian et al. 2018, Algorithm 1).
  void complete() {
    stats_.wait_s += comm_->wait();
    pending_ = false;
    switch (outcome_) {
      case Outcome::kAveraged: {
        const std::span<const float> sent = model_of(out_), got = model_of(in_);
        for (std::size_t i = 0; i < params_.size(); ++i) params_[i] += 0.5f * (got[i] - sent[i]);
        count_exchange(partner_, sequence_, start_step_, their_step_);
        break;
      }
      case Outcome::kRefused:
        count_refused(fmt::format("by rank {}: its answer to this peer's request of step {}",
                                  partner_, start_step_));
        break;
      case Outcome::kLost:
        count_lost(partner_, "during this peer's request");
        break;
    }
  }

  int local_steps_;
  Rng rng_;
  std::vector<float> out_, in_;  // header + this peer's snapshot; header + the partner's model
  std::unique_ptr<transport::Region> out_region_, in_region_;
  std::vector<std::uint64_t> sent_;  // per rank: the sequence number of the next message to it
  std::int64_t last_step_ = 0, start_step_ = 0, their_step_ = 0;
  int partner_ = -1;
  std::uint64_t sequence_ = 0;
  bool pending_ = false;
  Outcome outcome_ = Outcome::kLost;
  std::unique_ptr<CommThread> comm_ = std::make_unique<CommThread>();  // last: uses the above
};

// Answers its active neighbors' requests on a thread of its own, from the first step until every
// one of them has said goodbye (or was lost). The responder averages into `published_` (the model
// as of the last step) and `delta_`; the training thread adds the delta to its parameters at its
// next step and publishes them again.
class PassivePeer final : public AsyncBase {
 public:
  PassivePeer(const AveragingContext& ctx, std::vector<int> partners)
      : AsyncBase(ctx, /*initiator=*/false, std::move(partners)),
        reply_(message()),
        published_(floats()),  // published before the responder starts
        delta_(floats(), 0.0f) {
    reply_region_ = t_.register_region(bytes_of(reply_));
    for (std::size_t i = 0; i < partners_.size(); ++i) {
      inbox_.push_back(message());
      inbox_regions_.push_back(t_.register_region(bytes_of(inbox_.back())));
    }
    expected_.assign(partners_.size(), 0);
    posted_.resize(partners_.size());
    done_.assign(partners_.size(), false);
  }

  ~PassivePeer() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  void after_step(std::int64_t step) override {
    Stopwatch watch;
    rethrow();
    publish(step);
    if (!thread_.joinable() && !finished_) start();
    stats_.comm_s += watch.seconds();
  }

  void flush() override { publish(std::nullopt); }

  void finish() override {
    Stopwatch watch;
    if (!finished_) {
      if (!thread_.joinable()) {  // no step taken: the goodbyes are still to be served
        publish(std::nullopt);
        start();
      }
      thread_.join();
      finished_ = true;
    }
    stats_.wait_s += watch.seconds();
    rethrow();
    publish(std::nullopt);
    stats_.comm_s += watch.seconds();
  }

  bool in_flight() const override { return thread_.joinable() && !finished_; }

 private:
  // After a publish(): the responder answers with published_ from its first request on.
  void start() {
    thread_ = std::thread([this] {
      try {
        serve();
      } catch (...) {
        std::lock_guard lock(mutex_);
        error_ = std::current_exception();
      }
    });
  }

  void rethrow() {
    std::exception_ptr e;
    {
      std::lock_guard lock(mutex_);
      e = std::exchange(error_, nullptr);
    }
    if (e) std::rethrow_exception(e);
  }

  // params += delta; published = params (and its step, when one was taken).
  void publish(std::optional<std::int64_t> step) {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      params_[i] += delta_[i];
      delta_[i] = 0;
      published_[i] = params_[i];
    }
    if (step) published_step_ = *step;
  }

  void post(std::size_t a) {
    posted_[a] = t_.recv(partners_[a], tag(expected_[a], false), *inbox_regions_[a],
                         {0, message_bytes()});
  }

  void serve() {
    for (std::size_t a = 0; a < partners_.size(); ++a) post(a);
    // Polls while idle, backing off from 20 us to 1 ms: a request waits at most that long for
    // the responder to notice it, and an idle responder takes little of a core.
    auto pause = std::chrono::microseconds(0);
    while (!stop_) {
      bool progressed = false, open = false;
      for (std::size_t a = 0; a < partners_.size(); ++a) {
        if (done_[a]) continue;
        open = true;
        if (!hood_.poll(posted_[a])) {
          // A neighbor silent past the peer timeout: the Neighborhood decides (strict: the run
          // ends naming it; continue: it is given up and this side goes on without it).
          const auto silent = t_.silent_for(partners_[a]);
          if (!silent || *silent < peer_timeout_) continue;
        }
        progressed = true;
        if (hood_.wait(posted_[a], "an adpsgd request")) {
          answer(a);
        } else {
          done_[a] = true;  // lost between exchanges: nothing of it was taken
        }
      }
      if (!open) return;  // every active neighbor said goodbye or was lost
      if (progressed) {
        pause = std::chrono::microseconds(0);
      } else {
        pause = std::clamp(pause * 2, std::chrono::microseconds(20), std::chrono::microseconds(1000));
        std::this_thread::sleep_for(pause);
      }
    }
  }

  // One request that has arrived from partners_[a]: checked, answered, averaged.
  void answer(std::size_t a) {
    const int k = partners_[a];
    std::vector<float>& in = inbox_[a];
    const std::uint64_t seq = expected_[a]++;
    std::string why;
    const auto h = wire::check(bytes_of(in), posted_[a].state()->bytes,
                               {k, seq, floats(), false}, why);
    if (!h) {
      count_refused(why);
      wire::seal(bytes_of(reply_), {wire::Kind::kRefused, t_.rank(), 0, seq, 0}, {});
      Request send = t_.send(k, tag(seq, true), *reply_region_, {0, wire::kHeaderBytes});
      if (!hood_.wait(send, "an adpsgd refusal")) {
        done_[a] = true;
        return;
      }
      post(a);
      return;
    }
    if (h->kind == wire::Kind::kBye) {
      done_[a] = true;
      return;
    }
    std::int64_t mine;
    {
      std::lock_guard lock(mutex_);
      std::copy(published_.begin(), published_.end(), model_of(reply_).begin());
      mine = published_step_;
    }
    wire::seal(bytes_of(reply_), {wire::Kind::kReply, t_.rank(), 0, seq, mine}, model_of(reply_));
    Request send = t_.send(k, tag(seq, true), *reply_region_, {0, message_bytes()});
    if (!hood_.wait(send, "an adpsgd reply")) {
      count_lost(k, "while this peer answered its request");
      done_[a] = true;
      return;
    }
    // x_j += (x_i' - x_j') / 2 on both the published model and the delta: the average of the
    // values each side held when the exchange began, whatever step the trainer is in.
    {
      const std::span<const float> theirs = model_of(in), was = model_of(reply_);
      std::lock_guard lock(mutex_);
      for (std::size_t i = 0; i < published_.size(); ++i) {
        const float d = 0.5f * (theirs[i] - was[i]);
        published_[i] += d;
        delta_[i] += d;
      }
    }
    count_exchange(k, seq, mine, h->step);
    post(a);
  }

  std::vector<float> reply_;
  std::unique_ptr<transport::Region> reply_region_;
  std::vector<std::vector<float>> inbox_;  // per active neighbor: header + its model
  std::vector<std::unique_ptr<transport::Region>> inbox_regions_;
  std::vector<std::uint64_t> expected_;    // per active neighbor: the next request's number
  std::vector<Request> posted_;
  std::vector<bool> done_;
  std::mutex mutex_;  // guards published_, delta_, published_step_, error_; params_ from publish()
  std::vector<float> published_, delta_;
  std::int64_t published_step_ = 0;
  std::exception_ptr error_;
  std::atomic<bool> stop_{false};
  bool finished_ = false;
  std::thread thread_;  // last: its loop uses every member above
};

}  // namespace

namespace {
// Every H steps each active peer sends its model to one passive, which answers with its own:
// with half the peers active, a peer sends one model per exchange round on average.
CommPlan plan_adpsgd(const PlanContext& c) {
  const double bytes = static_cast<double>(c.parameters) * 4;
  return {{{"one model per exchange, active or passive", every_steps(c.config.algorithm.local_steps, c.steps), 1,
            bytes, bytes}},
          "asynchronous: an upper bound (an active peer starts an exchange only once its last one "
          "has landed), on threads of their own (comm_s is the training thread's)"};
}
}  // namespace

const AlgorithmInfo kAdpsgd{
    .name = "adpsgd",
    .summary = "AD-PSGD (Lian et al. 2018), asynchronous: actives average with a random passive "
               "neighbor at their own pace; a passive's responder thread answers while it computes",
    .needs = GraphNeeds::kAny,
    .static_graph_only = true,
    .asynchronous = true,
    .rejoins = RejoinPolicy::kNone,
    .device = false,
    .keys = kKeys,
    .make = [](const AveragingContext& c) -> std::unique_ptr<Averaging> {
      const auto rank = static_cast<std::size_t>(c.hood.transport().rank());
      wire::Roles roles =
          wire::split_roles(topology::graph_at(c.topology, c.hood.transport().world_size(), c.seed, 0));
      if (roles.active[rank]) return std::make_unique<ActivePeer>(c, std::move(roles.partners[rank]));
      return std::make_unique<PassivePeer>(c, std::move(roles.partners[rank]));
    },
    .plan = plan_adpsgd};

}  // namespace murmur::optimizers
