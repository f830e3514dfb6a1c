// algorithm.wire end to end: 3 peers launched over tcp with bf16 messages (fp32 sums) against
// fp32 on the same run, for the parameter allreduce and for D-PSGD on a ring. The 16-bit runs
// send about half the bytes and learn as fp32 does; the allreduce's peers keep one model.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "tests/runtime/launch_util.h"

using murmur::testing::launch_modes;
using murmur::testing::synthetic_config;
using murmur::testing::TempDir;

TEST_CASE("a bf16 wire halves the bytes of allreduce and dpsgd and learns as fp32 does",
          "[runtime][wire][multiproc]") {
  TempDir dir;
  const auto config = synthetic_config(dir, R"(train: {epochs: 2, batch_size: 32}
topology: {graph: ring}
)");
  const std::string bf16 = " --set algorithm.wire.format=bf16 --set algorithm.wire.rounding=stochastic";
  const std::vector<std::string> modes{"--set algorithm.name=allreduce",
                                       "--set algorithm.name=allreduce" + bf16,
                                       "--set algorithm.name=dpsgd",
                                       "--set algorithm.name=dpsgd" + bf16};
  const std::vector<nlohmann::json> figures = launch_modes(dir, config, modes);
  for (int m : {1, 3}) {
    const auto& fp32 = figures[m - 1]["peers"];
    const auto& half = figures[m]["peers"];
    CAPTURE(modes[m]);
    INFO(figures[m - 1].dump() << "\n" << figures[m].dump());
    for (int r = 0; r < 3; ++r) {
      // Half the bytes per round; the final average (fp32, once) adds a little.
      CHECK(half[r]["bytes_sent"].get<double>() < 0.55 * fp32[r]["bytes_sent"].get<double>());
      CHECK(half[r]["bytes_sent"].get<double>() > 0.45 * fp32[r]["bytes_sent"].get<double>());
      // Learns as fp32 does: within 2% of a 512-sample test set.
      CHECK(std::fabs(half[r]["test_accuracy"].get<double>() -
                      fp32[r]["test_accuracy"].get<double>()) <= 0.02);
      CHECK(half[r]["test_accuracy"].get<double>() > 0.5);
    }
  }
  // The allreduce's peers hold the bitwise same (16-bit valued) model after every average.
  const auto& allreduce = figures[1]["peers"];
  for (int r = 1; r < 3; ++r) CHECK(allreduce[r]["test_loss"] == allreduce[0]["test_loss"]);
}
