// The survivors' agreement (membership/agreement.h) over every process backend (tcp, ucx, ofi:
// they tell a heard rank from a silent one): a rank that never answers is dead for all; and a
// peer that was dropped as frozen and then came back, which counts its droppers dead as they
// count it, loses the count: the others agree on the ring without it.
#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <thread>
#include <vector>

#include "membership/agreement.h"
#include "membership/live_set.h"
#include "transport/tag.h"
#include "tests/time_scale.h"
#include "tests/transport/backends.h"

namespace murmur::membership {
namespace {

using std::chrono::milliseconds;
using transport::testing::built_backends;
using transport::testing::failures;
using transport::testing::run_ranks;

constexpr milliseconds kPeerTimeout{1000};

std::vector<std::string> process_backends() {
  std::vector<std::string> b;
  for (const auto& name : built_backends()) {
    if (name != "inproc") b.push_back(name);
  }
  return b;
}

std::vector<int> ranks_of(const LiveSet& live) { return live.live_ranks(5); }

TEST_CASE("agreement: a rank that never answers is dead for everyone", "[membership][multiproc]") {
  const std::string backend = GENERATE(from_range(process_backends()));
  CAPTURE(backend);
  auto results = run_ranks(backend, 3, [](transport::testing::RankContext& ctx) {
    LiveSet live(3, ctx.rank(), murmur::testing::scaled(kPeerTimeout));
    auto& t = ctx.transport();
    const transport::Tag done = transport::TagLayout(t).make(transport::purpose::kBenchmark, 0);
    std::array<std::byte, 1> byte{};
    auto region = t.register_region(byte);
    if (ctx.rank() == 2) {  // alive, but never enters the agreement; stays until rank 0 agreed
      auto r = t.recv(0, done, *region, {0, 1});
      MURMUR_CHECK(t.wait(r, transport::deadline_after(murmur::testing::scaled(kPeerTimeout) * 8)));
      return;
    }
    agree(t, live, 5);
    MURMUR_CHECK(ranks_of(live) == (std::vector<int>{0, 1}));
    if (ctx.rank() == 0) {
      auto s = t.send(2, done, *region, {0, 1});
      MURMUR_CHECK(t.wait(s, transport::deadline_after(murmur::testing::scaled(kPeerTimeout) * 2)));
    }
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

TEST_CASE("agreement: a restarted rank that asks to rejoin is not waited for",
          "[membership][multiproc]") {
  // Rank 2's new process is heard but answers no agreement while it asks to rejoin. Waiting
  // for it (4 peer timeouts: 2 minutes here) would outlast the harness's minute; the restart
  // probe (the rejoin responder, in a peer) must let the others go at once.
  const std::string backend = GENERATE(from_range(process_backends()));
  CAPTURE(backend);
  auto results = run_ranks(backend, 3, [](transport::testing::RankContext& ctx) {
    LiveSet live(3, ctx.rank(), murmur::testing::scaled(milliseconds(30000)));
    auto& t = ctx.transport();
    const transport::Tag done = transport::TagLayout(t).make(transport::purpose::kBenchmark, 0);
    std::array<std::byte, 1> byte{};
    auto region = t.register_region(byte);
    if (ctx.rank() == 2) {  // stays until rank 0 has agreed, without entering the agreement
      auto r = t.recv(0, done, *region, {0, 1});
      MURMUR_CHECK(t.wait(r, transport::deadline_after(std::chrono::seconds(90))));
      return;
    }
    live.restart_probe([](int r) { return r == 2; });
    agree(t, live, 5);
    MURMUR_CHECK(ranks_of(live) == (std::vector<int>{0, 1}));
    if (ctx.rank() == 0) {
      auto s = t.send(2, done, *region, {0, 1});
      MURMUR_CHECK(t.wait(s, transport::deadline_after(std::chrono::seconds(10))));
    }
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

TEST_CASE("agreement: of two that accuse each other, the most accused goes", "[membership][multiproc]") {
  // Ranks 0 and 2 dropped rank 1 (frozen); rank 1, continued, found them gone in turn. Rank 3
  // holds no view of either, hears all three, and gets rank 1's answer first.
  const std::string backend = GENERATE(from_range(process_backends()));
  CAPTURE(backend);
  auto results = run_ranks(backend, 4, [](transport::testing::RankContext& ctx) {
    const int r = ctx.rank();
    LiveSet live(4, r, murmur::testing::scaled(kPeerTimeout));
    if (r == 0 || r == 2) {
      live.mark_dead(1, "frozen (test)");
      std::this_thread::sleep_for(milliseconds(300));  // answers after rank 1's
    }
    if (r == 1) {
      live.mark_dead(0, "dropped us (test)");
      live.mark_dead(2, "dropped us (test)");
    }
    agree(ctx.transport(), live, 5);
    if (r != 1) MURMUR_CHECK(ranks_of(live) == (std::vector<int>{0, 2, 3}));
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

}  // namespace
}  // namespace murmur::membership
