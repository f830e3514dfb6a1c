// Helpers for the end-to-end tests that launch a few peers of a small synthetic run and compare
// their summaries: a config on 8x8 synthetic data, and one launch per mode.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/runtime/test_util.h"

namespace murmur::testing {

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// synthetic.yaml in `dir`: the 64-32 MLP on 8x8 synthetic data, one thread, generous
// timeouts, then `rest` (train, algorithm, ...).
inline std::filesystem::path synthetic_config(const TempDir& dir, const std::string& rest) {
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
inline std::vector<nlohmann::json> launch_modes(const TempDir& dir, const std::filesystem::path& config,
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

}  // namespace murmur::testing
