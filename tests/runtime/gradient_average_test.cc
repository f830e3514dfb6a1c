// allreduce with algorithm.average = gradients, end to end: 3 peers launched over tcp average
// their gradients before each step (as DDP), with and without the overlap with backward, and
// train as the parameter average does. With plain SGD the two are the same mathematics, so the
// peers' figures agree to rounding; the gradient modes keep every peer's model bitwise equal.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/runtime/test_util.h"

using murmur::testing::binary;
using murmur::testing::run_command;
using murmur::testing::TempDir;

namespace {
nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}
}  // namespace

TEST_CASE("averaging gradients trains as averaging parameters does", "[runtime][gradients][multiproc]") {
  TempDir dir;
  const auto config = dir.path() / "synthetic.yaml";
  std::ofstream(config) << R"(run: {threads: 1, log_every: 50}
data:
  name: synthetic
  synthetic: {train_size: 2048, test_size: 512, height: 8, width: 8}
model: {hidden: [64, 32]}
train: {epochs: 2, batch_size: 32, optimizer: {momentum: 0.0}}
algorithm: {name: allreduce}
transport: {connect_timeout_ms: 20000, recv_timeout_ms: 20000}
)";
  const std::string launcher =
      std::string(MURMUR_SOURCE_DIR) + "/tools/murmur-launch --peer " + binary("murmur-peer");
  const char* modes[] = {
      "",  // parameters, after the step
      "--set algorithm.average=gradients",
      // Buckets of 1 KiB: the 64-32 MLP on 8x8 inputs is 6.8k floats, so about 27 buckets.
      "--set algorithm.average=gradients --set algorithm.overlap=true --set algorithm.bucket_mb=0.001",
  };
  nlohmann::json figures[3];
  for (int m = 0; m < 3; ++m) {
    const auto out = dir.path() / ("mode" + std::to_string(m));
    auto r = run_command(launcher + " -n 3 " + config.string() + " " + modes[m] + " --out " +
                         out.string());
    INFO(modes[m] << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    figures[m] = read_json(out / "summary.json");
  }
  const double reference = figures[0]["average_model"]["test_loss"].get<double>();
  const double accuracy = figures[0]["average_model"]["test_accuracy"].get<double>();
  for (int m = 1; m < 3; ++m) {
    CAPTURE(modes[m]);
    // Every peer took the same steps from the same averaged gradient: one model, to the bit.
    // (The consensus distance is not 0 even so: the mean of equal floats is rounded.)
    for (int r = 0; r < 3; ++r) {
      const auto& peer = figures[m]["peers"][r];
      CHECK(peer["test_loss"] == figures[m]["peers"][0]["test_loss"]);
      const double loss = peer["test_loss"].get<double>();
      CHECK(std::fabs(loss - reference) < 1e-3 * std::max(1.0, reference));
      CHECK(std::fabs(peer["test_accuracy"].get<double>() - accuracy) <= 2.0 / 512);
    }
  }
}
