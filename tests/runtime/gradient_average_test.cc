// allreduce with algorithm.average = gradients, end to end: 3 peers launched over tcp average
// their gradients before each step (as DDP), with and without the overlap with backward, and
// train as the parameter average does. With plain SGD the two are the same mathematics, so the
// peers' figures agree to rounding; the gradient modes keep every peer's model bitwise equal.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

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

// synthetic.yaml in `dir`: the 64-32 MLP on 8x8 synthetic data, one thread, generous
// timeouts, then `rest` (train, algorithm, ...).
std::filesystem::path synthetic_config(const TempDir& dir, const std::string& rest) {
  const auto config = dir.path() / "synthetic.yaml";
  std::ofstream(config) << R"(run: {threads: 1, log_every: 50}
data:
  name: synthetic
  synthetic: {train_size: 2048, test_size: 512, height: 8, width: 8}
model: {hidden: [64, 32]}
transport: {connect_timeout_ms: 20000, recv_timeout_ms: 20000}
)" << rest;
  return config;
}

// Launches 3 peers of `config` once per mode (extra murmur-launch arguments), into mode0,
// mode1, ... of `dir`; returns each run's summary.json.
std::vector<nlohmann::json> launch_modes(const TempDir& dir, const std::filesystem::path& config,
                                         const std::vector<std::string>& modes) {
  const std::string launcher =
      std::string(MURMUR_SOURCE_DIR) + "/tools/murmur-launch --peer " + binary("murmur-peer");
  std::vector<nlohmann::json> figures;
  for (std::size_t m = 0; m < modes.size(); ++m) {
    const auto out = dir.path() / ("mode" + std::to_string(m));
    auto r = run_command(launcher + " -n 3 " + config.string() + " " + modes[m] + " --out " +
                         out.string());
    INFO(modes[m] << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    figures.push_back(read_json(out / "summary.json"));
  }
  return figures;
}
}  // namespace

TEST_CASE("averaging gradients trains as averaging parameters does", "[runtime][gradients][multiproc]") {
  TempDir dir;
  const auto config = synthetic_config(dir, R"(train: {epochs: 2, batch_size: 32, optimizer: {momentum: 0.0}}
algorithm: {name: allreduce}
)");
  const std::vector<std::string> modes{
      "",  // parameters, after the step
      "--set algorithm.average=gradients",
      // Buckets of 1 KiB: the 64-32 MLP on 8x8 inputs is 6.8k floats, so about 27 buckets.
      "--set algorithm.average=gradients --set algorithm.overlap=true --set algorithm.bucket_mb=0.001",
  };
  const std::vector<nlohmann::json> figures = launch_modes(dir, config, modes);
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

TEST_CASE("dgc trains through the sparse allreduce on a fraction of the bytes",
          "[runtime][gradients][dgc][multiproc]") {
  // 3 peers over tcp (one folds into the sparse allreduce's doubling): the dense allreduce of
  // gradients against DGC at 2% of the 6.8k-float MLP with a short warm-up. Every DGC peer takes
  // the same step from the same averaged sparse gradient (one model, to the bit), learns, and
  // sends far fewer bytes; its checkpoint keeps the accumulators.
  TempDir dir;
  const auto config = synthetic_config(dir, R"(train: {epochs: 3, batch_size: 32, optimizer: {momentum: 0.9}}
algorithm: {name: allreduce, average: gradients}
checkpoint: {every_steps: 20}
)");
  const std::vector<nlohmann::json> figures = launch_modes(
      dir, config,
      {"", "--set algorithm.sparsify.name=dgc --set algorithm.sparsify.density=0.02 "
           "--set algorithm.sparsify.warmup_steps=8"});
  const auto& dense = figures[0]["peers"];
  const auto& dgc = figures[1]["peers"];
  INFO(figures[0].dump() << "\n" << figures[1].dump());
  for (int r = 0; r < 3; ++r) {
    CHECK(dgc[r]["test_loss"] == dgc[0]["test_loss"]);
    // Learns: synthetic's 10 classes are far above chance, and not far below the dense run.
    CHECK(dgc[r]["test_accuracy"].get<double>() > 0.5);
    CHECK(dgc[r]["test_accuracy"].get<double>() >
          dense[r]["test_accuracy"].get<double>() - 0.15);
  }
  // 2% pairs of 8 bytes against the ring's 2(N-1)/N of 4 bytes each: well under a fifth in all,
  // the final average's dense allreduce and the warm-up included. (Not per peer: the rank that
  // hands the result to the folded one sends twice.)
  double dense_bytes = 0, dgc_bytes = 0;
  for (int r = 0; r < 3; ++r) {
    dense_bytes += dense[r]["bytes_sent"].get<double>();
    dgc_bytes += dgc[r]["bytes_sent"].get<double>();
  }
  CHECK(dgc_bytes < 0.2 * dense_bytes);
  // The resume checkpoint names both accumulators (the safetensors header is JSON text).
  std::ifstream in(dir.path() / "mode1" / "rank0" / "final.resume.safetensors", std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  CHECK(bytes.find("algorithm.dgc_momentum") != std::string::npos);
  CHECK(bytes.find("algorithm.dgc_residual") != std::string::npos);
}
