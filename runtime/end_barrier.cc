#include "runtime/end_barrier.h"

#include <chrono>
#include <cstddef>

#include <fmt/format.h>

#include "core/error.h"
#include "transport/tag.h"

namespace murmur::runtime {

namespace {

// Nothing else bounds these waits: a peer heard from is waited for, however slow.
constexpr auto kNoDeadline = std::chrono::hours(24 * 365);

}  // namespace

void await_everyone(transport::Transport& t, const TransportConfig& config,
                    const std::vector<int>& ranks) {
  if (ranks.size() < 2) return;
  const int self = t.rank(), leader = ranks.front();
  const transport::TagLayout layout(t);
  const transport::Tag arrived = layout.make(transport::purpose::kEndBarrier, 0);
  const transport::Tag released = layout.make(transport::purpose::kEndBarrier, 1);
  std::vector<std::byte> bytes(ranks.size());
  auto region = t.register_region(bytes);
  // Waits for `request` while its peer is heard.
  auto heard = [&](transport::Request& request, int peer, const char* what) {
    const auto silence = std::chrono::milliseconds(
        t.silent_for(peer) ? config.peer_timeout_ms : config.recv_timeout_ms);
    if (transport::wait_heard(t, request, silence, kNoDeadline) == transport::WaitEnd::kDone) return;
    t.cancel(request);
    throw PeerLost(fmt::format("{}: rank {}: rank {} was silent for {} ms while {}", t.name(),
                               self, peer, silence.count(), what));
  };
  if (self != leader) {
    auto release = t.recv(leader, released, *region, {1, 1});
    auto report = t.send(leader, arrived, *region, {0, 1});
    heard(report, leader, "it reported the end of its steps");
    heard(release, leader, "this peer waited for every peer to end its steps");
    return;
  }
  std::vector<transport::Request> reports;
  for (std::size_t k = 1; k < ranks.size(); ++k) {
    reports.push_back(t.recv(ranks[k], arrived, *region, {k, 1}));
  }
  for (std::size_t k = 1; k < ranks.size(); ++k) {
    heard(reports[k - 1], ranks[k], "this peer waited for it to end its steps");
  }
  std::vector<std::pair<int, transport::Request>> releases;
  for (std::size_t k = 1; k < ranks.size(); ++k) {
    releases.emplace_back(ranks[k], t.send(ranks[k], released, *region, {0, 1}));
  }
  for (auto& [peer, r] : releases) heard(r, peer, "it was told every peer had ended its steps");
}

}  // namespace murmur::runtime
