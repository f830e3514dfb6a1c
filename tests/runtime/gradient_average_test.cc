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

#include "tests/runtime/launch_util.h"

using murmur::testing::launch_modes;
using murmur::testing::synthetic_config;
using murmur::testing::TempDir;


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
