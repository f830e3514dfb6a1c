// The config checks that need the rooms above core, linked as in murmur-peer: every name a room
// registered for a key (core/names.h) is accepted there and nothing else, with file and line;
// the model must fit the data; the algorithm's registry entry decides what it accepts; every
// shipped config passes check_config whole.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "core/names.h"
#include "runtime/peer.h"
#include "tests/skip.h"

namespace murmur::runtime {
namespace {

std::string load_error(const std::string& yaml) {
  try {
    load_config_string(yaml, "run.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("every registered key refuses a name its room does not know", "[config]") {
  const char* keys[][2] = {{"algorithm", "name"},      {"topology", "graph"},
                           {"topology", "weights"},    {"transport", "backend"},
                           {"model", "name"},          {"data", "name"},
                           {"data", "partition"},      {"run", "device"},
                           {"run", "on_peer_failure"}};
  for (const auto& [section, key] : keys) {
    const std::string path = std::string(section) + "." + key;
    CAPTURE(path);
    const auto names = registered_names(path);
    REQUIRE_FALSE(names.empty());  // the room's registry is linked and registered
    for (const std::string& name : names) {
      CHECK(load_error(std::string(section) + ":\n  " + key + ": " + name + "\n").empty());
    }
    const std::string error = load_error(std::string(section) + ":\n  " + key + ": bogus\n");
    CHECK(error.rfind("run.yaml:2: " + path + ": \"bogus\" is not one of " + names.front(), 0) == 0);
  }
  for (const char* path : {"train.optimizer.name", "train.schedule.name", "algorithm.compressor.name"}) {
    CAPTURE(path);
    CHECK_FALSE(registered_names(path).empty());
  }
  CHECK(load_error("train:\n  optimizer: {name: adam}\n").find("is not one of sgd, adamw") !=
        std::string::npos);
}

TEST_CASE("check_config asks the rooms: model and data, algorithm and graph", "[config]") {
  ExperimentConfig c;
  c.model.name = "cnn";
  CHECK(check_config(c).empty());  // fashion_mnist is 28x28
  c.data.name = "synthetic";
  CHECK_THROWS_WITH(check_config(c), Catch::Contains("cnn needs 28x28 images"));
  c.data.synthetic.height = c.data.synthetic.width = 28;
  CHECK(check_config(c).empty());

  c.world.size = 4;
  c.algorithm.name = "dpsgd";
  c.algorithm.compressor.name = "topk";
  CHECK_THROWS_WITH(check_config(c), Catch::Contains("algorithm.compressor.name: topk needs an "
                                                     "algorithm that compresses (choco)"));
  c.algorithm.name = "choco";
  CHECK(check_config(c).empty());
  c.algorithm.compressor.name = "none";
  c.algorithm.name = "allreduce";
  c.algorithm.overlap = true;
  CHECK_THROWS_WITH(check_config(c), Catch::Contains("algorithm.overlap: allreduce does not overlap"));
  c.algorithm.overlap = false;
  c.algorithm.consensus_lr = 0.5;  // choco's key, set for allreduce: a warning, not an error
  const auto warnings = check_config(c);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "algorithm.consensus_lr is set, but allreduce does not read it (its keys: "
                       "local_steps, hierarchical, overlap, average, bucket_mb, sparsify, wire)");
  c.algorithm.name = "dpsgd";
  c.topology.graph = "hypercube";
  c.world.size = 6;
  CHECK_THROWS_WITH(check_config(c), Catch::Contains("power of 2"));
  c.topology.graph = "random_kout";
  c.world.size = 4;
  CHECK_THROWS_WITH(check_config(c), Catch::Contains("needs doubly stochastic weights"));
  c.algorithm.name = "sgp";
  c.algorithm.consensus_lr = 1.0;
  CHECK(check_config(c).empty());
  c.algorithm.one_sided = true;  // sgp's key: its messages written into the receivers' windows
  CHECK(check_config(c).empty());
  c.algorithm.name = "choco";
  c.topology.graph = "ring";
  const auto one_sided = check_config(c);
  REQUIRE(one_sided.size() == 1);
  CHECK_THAT(one_sided[0], Catch::StartsWith("algorithm.one_sided is set, but choco does not read it"));
}

TEST_CASE("every shipped config passes check_config", "[config]") {
  const std::filesystem::path dir = std::filesystem::path(MURMUR_SOURCE_DIR) / "configs";
  if (!std::filesystem::exists(dir)) MURMUR_SKIP("no configs/ directory");
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    CAPTURE(entry.path().string());
    const ExperimentConfig c = load_config(entry.path());
    CHECK(check_config(c).empty());
    ++n;
  }
  CHECK(n >= 10);
}

}  // namespace
}  // namespace murmur::runtime
