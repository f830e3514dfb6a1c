// One-sided push-sum and pairwise gossip (algorithm.one_sided, optimizers/put_windows.h): the
// same floats as the two-sided path, bitwise, round by round, over every backend with put()
// (ucx, ofi), on static and time-varying graphs, with messages late by tau; a message that is not what its notice says
// is refused before it is used; a backend without put() is one clear error.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <limits>

#include "core/crc32c.h"
#include "core/error.h"
#include "device/device.h"
#include "optimizers/device_arrays.h"
#include "optimizers/put_windows.h"
#include "tests/optimizers/consensus_util.h"
#include "tests/skip.h"
#include "tests/time_scale.h"
#include "tests/transport/backends.h"
#include "transport/factory.h"

namespace murmur::optimizers::testing {
namespace {

namespace tt = murmur::transport::testing;

std::vector<std::string> put_backends() {
  std::vector<std::string> out;
  for (const auto& b : transport::process_backends()) {
    if (b == "ucx" || b == "ofi") out.push_back(b);
  }
  return out;
}

// Runs `run` two-sided, then one-sided, and checks that both averaged to the same floats.
void check_same_floats(ConsensusRun run) {
  run.rounds = 12;
  run.dim = 3001;
  run.algorithm.one_sided = false;
  const ConsensusResult two = run_consensus(run);
  INFO(two.failures);
  REQUIRE(two.failures.empty());
  run.algorithm.one_sided = true;
  const ConsensusResult one = run_consensus(run);
  INFO(one.failures);
  REQUIRE(one.failures.empty());
  CHECK(one.error[run.rounds] < 0.5 * one.error[0]);  // it did average
  CHECK(one.error == two.error);
  CHECK(one.flushed == two.flushed);
  CHECK(one.spread == two.spread);
}

TEST_CASE("one-sided push-sum equals the two-sided one bitwise", "[consensus][multiproc]") {
  const auto backends = put_backends();
  if (backends.empty()) MURMUR_SKIP("neither ucx nor ofi is built");
  const auto backend = GENERATE_COPY(from_range(backends));
  struct Case {
    const char* graph;
    int tau, ranks;
  };
  // Time-varying with a period (its union of neighbors), static with several in-neighbors and
  // messages 1 round late, and 2 rounds late on a ring of 3 (every slot reused several times).
  const Case cases[] = {{"one_peer_exponential", 0, 4}, {"exponential", 1, 5}, {"ring", 2, 3}};
  for (const Case& c : cases) {
    CAPTURE(backend, c.graph, c.tau, c.ranks);
    ConsensusRun run;
    run.backend = backend;
    run.ranks = c.ranks;
    run.topology = graph(c.graph);
    run.algorithm = algorithm("sgp");
    run.algorithm.tau = c.tau;
    check_same_floats(run);
  }
}

TEST_CASE("one-sided pairwise gossip equals the two-sided one bitwise", "[consensus][multiproc]") {
  const auto backends = put_backends();
  if (backends.empty()) MURMUR_SKIP("neither ucx nor ofi is built");
  const auto backend = GENERATE_COPY(from_range(backends));
  // A ring (partners alternate between two neighbors, the slot of each reused) and a directed
  // graph whose in- and out-neighbors differ (a partner may be either).
  for (const auto& [g, ranks] : {std::pair{"ring", 4}, std::pair{"exponential", 5}}) {
    CAPTURE(backend, g, ranks);
    ConsensusRun run;
    run.backend = backend;
    run.ranks = ranks;
    run.topology = graph(g);
    run.algorithm = algorithm("pairwise");
    check_same_floats(run);
  }
}

TEST_CASE("one-sided push-sum on a backend without put is one clear error", "[multiproc]") {
  ConsensusRun run;
  run.backend = "tcp";
  run.ranks = 2;
  run.topology = graph("ring");
  run.algorithm = algorithm("sgp");
  run.algorithm.one_sided = true;
  run.rounds = 1;
  const ConsensusResult r = run_consensus(run);
  CHECK_THAT(r.failures, Catch::Contains("algorithm.one_sided: the tcp backend has no one-sided put"));
}

TEST_CASE("a one-sided message that is not what its notice says is refused", "[multiproc]") {
  const auto backends = put_backends();
  if (backends.empty()) MURMUR_SKIP("neither ucx nor ofi is built");
  const auto backend = GENERATE_COPY(from_range(backends));
  CAPTURE(backend);
  constexpr std::size_t kFloats = 1000;
  constexpr unsigned kPurpose = transport::purpose::kBenchmark;
  auto results = tt::run_ranks(backend, 2, [&](tt::RankContext& ctx) {
    transport::Transport& t = ctx.transport();
    device::Device& dev = device::cpu();
    DeviceFloatOps ops(dev);
    TransportConfig tc;
    tc.recv_timeout_ms = murmur::testing::scaled_ms(30000);
    auto hood = membership::strict_neighborhood(t, transport::collective_options(tc), ops);
    const bool sender = ctx.rank() == 1;
    // Two slots: rounds 0 and 2 share one, so round 2's write waits for round 0's ack.
    PutWindows windows(*hood, dev, kFloats, 2, sender ? std::vector<int>{} : std::vector<int>{1},
                       sender ? std::vector<int>{0} : std::vector<int>{}, kPurpose);
    std::vector<float> message(kFloats);
    auto region = t.register_region(std::as_writable_bytes(std::span(message)));
    const transport::ByteRange all{0, kFloats * sizeof(float)};
    if (sender) {
      for (std::int64_t round = 0; round < 4; ++round) {
        for (std::size_t i = 0; i < kFloats; ++i) message[i] = static_cast<float>(round * 10000 + i);
        std::uint32_t crc = crc32c(std::as_bytes(std::span(message)));
        if (round == 3) crc ^= 1;  // what lands is not what the notice says
        MURMUR_CHECK(windows.put(0, round, *region, all, crc));
        windows.wait_sent(round);
      }
      windows.progress(std::numeric_limits<std::int64_t>::max());
      return;  // the receiver refuses round 3: no ack comes
    }
    for (std::int64_t round = 0; round < 4; ++round) {
      windows.expect(1, round);
      if (round < 3) {
        const std::span<const float> got = windows.landed(1, round);
        MURMUR_CHECK(got.size() == kFloats);
        for (std::size_t i = 0; i < kFloats; ++i) {
          MURMUR_CHECK(got[i] == static_cast<float>(round * 10000 + i));
        }
        windows.release(1, round);
        continue;
      }
      try {
        windows.landed(1, round);
        throw std::runtime_error("a message whose CRC32C is not its notice's was taken");
      } catch (const ProtocolError& e) {
        const std::string what = e.what();
        MURMUR_CHECK(what.find("rank 1, round 3") != std::string::npos);
        MURMUR_CHECK(what.find("CRC32C") != std::string::npos);
      }
    }
  });
  INFO(tt::failures(results));
  CHECK(tt::failures(results).empty());
}

}  // namespace
}  // namespace murmur::optimizers::testing
