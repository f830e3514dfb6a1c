// data.shuffle end to end: 3 peers launched over tcp on a Dirichlet(0.1) split of synthetic
// data trade samples while they train, learn and checkpoint the traded shard; a second launch
// into the same directory, its newer checkpoints removed, resumes at step 20 (the shard rebuilt
// from the checkpoint) and trades and trains on to the bitwise same models.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>

#include "tests/runtime/launch_util.h"

using murmur::testing::binary;
using murmur::testing::read_json;
using murmur::testing::run_command;
using murmur::testing::synthetic_config;
using murmur::testing::TempDir;

TEST_CASE("peers trade samples while they train, and resume with the traded shard",
          "[runtime][shuffle][multiproc]") {
  TempDir dir;
  const auto config = synthetic_config(dir, R"(train: {epochs: 2, batch_size: 32}
algorithm: {name: dpsgd}
topology: {graph: ring}
checkpoint: {every_steps: 20}
)");
  const auto out = dir.path() / "run";
  const std::string launch = std::string(MURMUR_SOURCE_DIR) + "/tools/murmur-launch --peer " +
                             binary("murmur-peer") + " -n 3 " + config.string() +
                             " --set data.partition=dirichlet --set data.dirichlet_alpha=0.1"
                             " --set data.shuffle.fraction=0.2 --set data.shuffle.every_steps=8"
                             " --out " + out.string();
  auto first = run_command(launch);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  CHECK(first.output.find("sample shuffle: each peer trades") != std::string::npos);
  const auto summary = read_json(out / "summary.json");
  for (int r = 0; r < 3; ++r) CHECK(summary["peers"][r]["test_accuracy"].get<double>() > 0.5);
  std::ifstream in(out / "rank1" / "final.resume.safetensors", std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  CHECK(bytes.find("murmur.data.shuffle_origin") != std::string::npos);
  // Again into the same directory, from step 20: every peer resumes from its checkpoint there.
  for (int r = 0; r < 3; ++r) {
    const auto rank = out / ("rank" + std::to_string(r));
    std::filesystem::remove(rank / "final.resume.safetensors");
    std::filesystem::remove(rank / "final.safetensors");
    std::filesystem::remove(rank / "ckpt-0000000040.safetensors");
  }
  auto again = run_command(launch);
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  CHECK(again.output.find("ckpt-0000000020.safetensors at step 20") != std::string::npos);
  CHECK(again.output.find("skipping unusable checkpoint") == std::string::npos);
  const auto resumed = read_json(out / "summary.json");
  for (int r = 0; r < 3; ++r) {
    CHECK(resumed["peers"][r]["test_loss"] == summary["peers"][r]["test_loss"]);
  }
}
