// Distributed::agree_start: the peers of a run that starts (or resumes) together go on from the
// lowest step any of them holds. After one Ctrl-C their checkpoints can be a step or two apart
// (a peer that heard the signal late finished another step), and the lockstep algorithms wait
// forever for a round tag that a neighbor has passed. Over inproc, with the run's algorithm.
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "core/config.h"
#include "device/device.h"
#include "runtime/distributed.h"
#include "transport/inproc/transport.h"

namespace {

// Each rank's agreed step, given its own.
std::vector<std::int64_t> agree(const std::vector<std::int64_t>& steps, const std::string& algorithm) {
  const int n = static_cast<int>(steps.size());
  murmur::ExperimentConfig config;
  config.world.size = n;
  config.transport.backend = "inproc";
  config.algorithm.name = algorithm;
  auto transports = murmur::transport::inproc::make_world(n);
  std::vector<std::int64_t> agreed(steps.size(), -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    std::shared_ptr<murmur::transport::Transport> mine(std::move(transports[static_cast<std::size_t>(r)]));
    threads.emplace_back([&, r, mine = std::move(mine)] {
      std::vector<float> params(64, static_cast<float>(r));
      murmur::runtime::Distributed dist(config, r, murmur::device::cpu(), params, mine);
      agreed[static_cast<std::size_t>(r)] = dist.agree_start(steps[static_cast<std::size_t>(r)]);
    });
  }
  for (auto& t : threads) t.join();
  return agreed;
}

}  // namespace

TEST_CASE("runtime/peers stopped a step apart go on from the lowest step", "[runtime]") {
  CHECK(agree({1148, 1149, 1150, 1149}, "dpsgd") == std::vector<std::int64_t>(4, 1148));
  CHECK(agree({0, 0, 0}, "allreduce") == std::vector<std::int64_t>(3, 0));
}

TEST_CASE("runtime/the agreed step is exact for steps up to 2^36", "[runtime]") {
  const std::int64_t big = (std::int64_t{1} << 35) + 4095;  // every base-4096 digit in use
  CHECK(agree({big + 1, big, big + 4097, big + 2, big + 3}, "sgp") == std::vector<std::int64_t>(5, big));
}
