#include "membership/neighborhood.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/names.h"
#include "membership/live_allreduce.h"

namespace murmur::membership {
namespace {

class Strict final : public Neighborhood {
 public:
  Strict(transport::Transport& t, transport::CollectiveOptions options, transport::FloatOps& ops)
      : Neighborhood(t), options_(options), allreduce_(t, options, ops) {}

  bool alive(int, std::int64_t) const override { return true; }
  std::vector<int> ranks(std::int64_t) const override {
    std::vector<int> all(static_cast<std::size_t>(transport().world_size()));
    for (int r = 0; r < transport().world_size(); ++r) all[r] = r;
    return all;
  }
  bool wait(transport::Request& request, const char* what) override {
    transport::wait_or_lost(transport(), request, options_.timeout, what);
    return true;
  }
  bool poll(transport::Request& request) override { return transport().test(request); }
  bool average(transport::Region& region, std::span<float> data, transport::Tag tag,
               std::int64_t) override {
    allreduce_.run(region, data, transport::ReduceOp::kAverage, tag);
    return true;
  }

 private:
  transport::CollectiveOptions options_;
  transport::Allreduce allreduce_;
};

class Live final : public Neighborhood {
 public:
  Live(transport::Transport& t, LiveSet& live, transport::CollectiveOptions options,
       transport::FloatOps& ops)
      : Neighborhood(t), live_(live), allreduce_(t, live, options, ops) {}

  bool alive(int r, std::int64_t step) const override { return live_.alive(r, step); }
  bool joins_at(std::int64_t round) const override { return live_.joins_at(round); }
  bool rejoins_at(std::int64_t round) const override { return live_.rejoins_at(round); }
  std::vector<int> ranks(std::int64_t step) const override { return live_.live_ranks(step); }
  bool wait(transport::Request& request, const char* what) override {
    if (request.state()->done && !request.state()->error) return true;
    return wait_live(transport(), request, live_, what);
  }
  bool poll(transport::Request& request) override {
    try {
      return transport().test(request);
    } catch (const PeerLost&) {
      return true;  // wait() finds the failure and marks the peer
    }
  }
  bool average(transport::Region& region, std::span<float> data, transport::Tag tag,
               std::int64_t round) override {
    return allreduce_.average(region, data, tag, round);
  }
  bool average_at_join(transport::Region& region, std::span<float> data, transport::Tag tag,
                       std::int64_t round) override {
    return allreduce_.average(region, data, tag, round, [&] { return live_.joins_at(round); });
  }
  LiveSet* live() override { return &live_; }

 private:
  LiveSet& live_;
  LiveAllreduce allreduce_;
};

}  // namespace

bool wait_live(transport::Transport& transport, transport::Request& request, LiveSet& live,
               const char* what) {
  const int peer = request.state()->peer;
  transport::WaitEnd end{};
  try {
    end = transport::wait_heard(transport, request, live.peer_timeout(), live.message_timeout());
    if (end == transport::WaitEnd::kDone) return true;
  } catch (const PeerLost& e) {
    live.mark_dead(peer, e.what());
    return false;
  }
  transport.cancel(request);  // the buffer may be reused once we return
  live.mark_dead(peer, end == transport::WaitEnd::kSilent
                           ? fmt::format("{}: the rank sent nothing for transport.peer_timeout_ms "
                                         "= {}", what, live.peer_timeout().count())
                           : fmt::format("{}: heard, but the message did not come within "
                                         "transport.recv_timeout_ms = {}", what,
                                         live.message_timeout().count()));
  return false;
}

std::vector<std::string_view> failure_policies() { return {"stop", "continue"}; }

namespace {
[[maybe_unused]] const bool kRegistered = register_names("run.on_peer_failure", failure_policies());
}  // namespace

bool is_live(std::string_view policy) {
  const auto policies = failure_policies();
  if (policy == policies[0]) return false;
  if (policy == policies[1]) return true;
  throw ConfigError(fmt::format("run.on_peer_failure: unknown policy '{}' ({})", policy,
                                fmt::join(policies, " | ")));
}

std::unique_ptr<Neighborhood> strict_neighborhood(transport::Transport& transport,
                                                  transport::CollectiveOptions options,
                                                  transport::FloatOps& ops) {
  return std::make_unique<Strict>(transport, options, ops);
}

std::unique_ptr<Neighborhood> live_neighborhood(transport::Transport& transport, LiveSet& live,
                                                transport::CollectiveOptions options,
                                                transport::FloatOps& ops) {
  return std::make_unique<Live>(transport, live, options, ops);
}

}  // namespace murmur::membership
