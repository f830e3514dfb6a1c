// The YAML loader, --set overrides, cross-field validation and the resolved-config writers.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/names.h"
#include "tests/skip.h"

using murmur::ConfigError;
using murmur::ExperimentConfig;
using murmur::load_config_string;

namespace {

// As nn/model.cc registers them: test_core links no room above core, so this file stands in
// for nn's model table in the name checks below.
[[maybe_unused]] const bool kModelNames = murmur::register_names("model.name", {"mlp", "cnn", "logreg"});

// The message of the ConfigError that `fn` throws, or "" if it throws none.
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string load_error(const std::string& yaml) {
  return error_of([&] { load_config_string(yaml, "run.yaml"); });
}

std::string override_error(const std::string& assignment) {
  ExperimentConfig c;
  return error_of([&] { murmur::apply_override(c, assignment); });
}

}  // namespace

TEST_CASE("an empty file gives the defaults", "[config]") {
  const ExperimentConfig c = load_config_string("", "run.yaml");
  const ExperimentConfig d;
  CHECK(murmur::to_json(c) == murmur::to_json(d));
  CHECK(c.model.name == "mlp");
  CHECK(c.train.epochs == 5);
  CHECK(load_config_string("# only a comment\n", "x").train.batch_size == 64);
  CHECK(load_config_string("model:\n", "x").model.hidden == std::vector<int>{512, 256});
}

TEST_CASE("values of every field type are read", "[config]") {
  const ExperimentConfig c = load_config_string(R"(
run: {name: exp1, seed: 18446744073709551615, device: cuda}
model: {name: logreg, hidden: [3, 4], dropout: 0.25}
data: {normalize: false, mean: -1.5e-3, synthetic: {height: 28}}
train: {epochs: 7, max_steps: 123456789012, optimizer: {name: adamw, lr: 1e-3}}
transport: {peers: ["a:1", b:2]}
topology: {graph: custom, edges: [[0, 1], [1, 0]], matrix: [[0.5, 0.5], [0.5, 0.5]]}
)", "run.yaml");
  CHECK(c.run.name == "exp1");
  CHECK(c.run.seed == 18446744073709551615ULL);
  CHECK(c.run.device == "cuda");
  CHECK(c.model.name == "logreg");
  CHECK(c.model.hidden == std::vector<int>{3, 4});
  CHECK(c.model.dropout == 0.25);
  CHECK_FALSE(c.data.normalize);
  CHECK(c.data.mean == -1.5e-3);
  CHECK(c.data.synthetic.height == 28);
  CHECK(c.data.synthetic.width == 8);  // untouched sibling keeps its default
  CHECK(c.train.epochs == 7);
  CHECK(c.train.max_steps == 123456789012);
  CHECK(c.train.optimizer.name == "adamw");
  CHECK(c.train.optimizer.lr == 1e-3);
  CHECK(c.train.optimizer.momentum == 0.9);
  CHECK(c.transport.peers == std::vector<std::string>{"a:1", "b:2"});
  CHECK(c.topology.edges == std::vector<std::vector<int>>{{0, 1}, {1, 0}});
  CHECK(c.topology.matrix == std::vector<std::vector<double>>{{0.5, 0.5}, {0.5, 0.5}});
}

TEST_CASE("load errors name file, line, key and problem", "[config]") {
  CHECK(load_error("model:\n  name: mlp\ntrain:\n  epochs: abc\n") ==
        "run.yaml:4: train.epochs: expected an integer, got \"abc\"");
  CHECK(load_error("\n\nmodel:\n  nmae: mlp\n") ==
        "run.yaml:4: model.nmae: unknown key (known: name, hidden, dropout)");
  CHECK(load_error("train:\n  batch_size: 3\n  epochs: 0\n") ==
        "run.yaml:3: train.epochs: 0 is out of range [1, 1e+06]");
  CHECK(load_error("\nmodel: {name: rnn}\n") ==
        "run.yaml:2: model.name: \"rnn\" is not one of mlp, cnn, logreg");
  CHECK(load_error("modle: {}\n").find("run.yaml:1: modle: unknown key (known: run, model, data") == 0);
}

TEST_CASE("types are strict", "[config]") {
  CHECK(load_error("train: {epochs: 3.5}") == "run.yaml:1: train.epochs: expected an integer, got \"3.5\"");
  CHECK(load_error("train: {epochs: \"3\"}") == "run.yaml:1: train.epochs: expected an integer, got \"3\"");
  CHECK(load_error("train: {epochs: {a: 1}}") == "run.yaml:1: train.epochs: expected an integer, got a mapping");
  CHECK(load_error("train: {epochs: [1]}") == "run.yaml:1: train.epochs: expected an integer, got a list");
  CHECK(load_error("train: {epochs: }") == "run.yaml:1: train.epochs: expected an integer, got nothing");
  CHECK(load_error("train: {epochs: 99999999999}") ==
        "run.yaml:1: train.epochs: 99999999999 does not fit in a 32-bit integer");
  CHECK(load_error("run: {seed: -1}") == "run.yaml:1: run.seed: expected a non-negative integer, got \"-1\"");
  CHECK(load_error("data: {normalize: yes}") == "run.yaml:1: data.normalize: expected true or false, got \"yes\"");
  CHECK(load_error("data: {normalize: \"true\"}") ==
        "run.yaml:1: data.normalize: expected true or false, got \"true\"");
  CHECK(load_error("data: {mean: abc}") == "run.yaml:1: data.mean: expected a number, got \"abc\"");
  CHECK(load_error("data: {mean: inf}") == "run.yaml:1: data.mean: expected a number, got \"inf\"");
  CHECK(load_error("data: {mean: \"0.5\"}") == "run.yaml:1: data.mean: expected a number, got \"0.5\"");
  CHECK(load_error("run: {name: {a: 1}}") == "run.yaml:1: run.name: expected a string, got a mapping");
  CHECK(load_error("model: {hidden: 5}") == "run.yaml:1: model.hidden: expected a list, got \"5\"");
  CHECK(load_error("model: 5") == "run.yaml:1: model: expected a mapping, got \"5\"");
  CHECK(load_error("- 1\n- 2\n") == "run.yaml:1: expected a mapping, got a list");
  // Integral doubles and YAML's "+" sign are fine; "+-" is not.
  CHECK(load_config_string("data: {mean: 2}", "x").data.mean == 2.0);
  CHECK(load_config_string("train: {epochs: +4}", "x").train.epochs == 4);
  CHECK(load_error("train: {epochs: +-4}") == "run.yaml:1: train.epochs: expected an integer, got \"+-4\"");
}

TEST_CASE("ranges apply to numbers and to each element of numeric lists", "[config]") {
  CHECK(load_error("model: {dropout: 1.5}") == "run.yaml:1: model.dropout: 1.5 is out of range [0, 0.99]");
  CHECK(load_error("model: {dropout: .nan}") == "run.yaml:1: model.dropout: .nan is out of range [0, 0.99]");
  CHECK(load_error("model:\n  hidden:\n    - 4\n    - 0\n") ==
        "run.yaml:4: model.hidden[1]: 0 is out of range [1, 1.04858e+06]");
  CHECK(load_error("topology: {edges: [[0, 1], [x]]}") ==
        "run.yaml:1: topology.edges[1][0]: expected an integer, got \"x\"");
}

TEST_CASE("syntax errors, duplicates and missing files name the file", "[config]") {
  const std::string syntax = load_error("model:\n  name: [mlp\n");
  CHECK(syntax.rfind("run.yaml:", 0) == 0);
  CHECK(syntax.find("YAML syntax error") != std::string::npos);
  CHECK(load_error("train:\n  epochs: 1\n  epochs: 2\n") ==
        "run.yaml:3: train.epochs: duplicate key (first at line 2)");
  const std::string missing =
      error_of([] { murmur::load_config("/nonexistent/murmur-run.yaml"); });
  CHECK(missing.rfind("/nonexistent/murmur-run.yaml: cannot open config:", 0) == 0);
}

TEST_CASE("load_config reads a file", "[config]") {
  const auto path = std::filesystem::temp_directory_path() / "murmur_config_test_run.yaml";
  {
    std::ofstream out(path);
    out << "train:\n  epochs: 9\n  batch_size: oops\n";
  }
  CHECK(error_of([&] { murmur::load_config(path); }) ==
        path.string() + ":3: train.batch_size: expected an integer, got \"oops\"");
  {
    std::ofstream out(path);
    out << "train:\n  epochs: 9\n";
  }
  CHECK(murmur::load_config(path).train.epochs == 9);
  std::filesystem::remove(path);
}

TEST_CASE("overrides use the same checks", "[config]") {
  ExperimentConfig c;
  murmur::apply_override(c, "train.epochs=3");
  murmur::apply_override(c, "model.hidden=[8, 9]");
  murmur::apply_override(c, "train.optimizer.lr=0.5");
  murmur::apply_override(c, "run.out=");
  murmur::apply_override(c, "data.synthetic={height: 28, width: 28}");
  CHECK(c.train.epochs == 3);
  CHECK(c.model.hidden == std::vector<int>{8, 9});
  CHECK(c.train.optimizer.lr == 0.5);
  CHECK(c.run.out.empty());
  CHECK(c.data.synthetic.width == 28);
  CHECK(c.data.synthetic.classes == 10);

  CHECK(override_error("train.epochs=abc") == "--set train.epochs=abc: expected an integer, got \"abc\"");
  CHECK(override_error("train.epochs=0") == "--set train.epochs=0: 0 is out of range [1, 1e+06]");
  CHECK(override_error("model.name=rnn") == "--set model.name=rnn: \"rnn\" is not one of mlp, cnn, logreg");
  CHECK(override_error("train.epoch=3") ==
        "--set train.epoch=3: train.epoch: unknown key (known: epochs, batch_size, max_steps, "
        "optimizer, schedule, batch_ramp)");
  CHECK(override_error("model.hidden=[1, 0]") == "--set model.hidden=[1, 0]: model.hidden[1]: 0 is out of "
                                                 "range [1, 1.04858e+06]");
  CHECK(override_error("train.epochs.x=1") ==
        "--set train.epochs.x=1: train.epochs: expected an integer, got a mapping");
  CHECK(override_error("train.epochs") == "--set train.epochs: expected key=value");
  CHECK(override_error("=3") == "--set =3: expected key=value");
  CHECK(override_error("model.name=[x").find("--set model.name=[x: YAML syntax error") == 0);

  // A failed override leaves the config as it was.
  ExperimentConfig d;
  CHECK_THROWS_AS(murmur::apply_override(d, "data.synthetic={height: 28, width: 0}"), ConfigError);
  CHECK(d.data.synthetic.height == 8);
}

TEST_CASE("validate enforces cross-field rules", "[config]") {
  ExperimentConfig c;
  CHECK_NOTHROW(murmur::validate(c));

  c.world = {4, 4};
  CHECK_THROWS_WITH(murmur::validate(c), Catch::Contains("world.rank: 4 is not below world.size 4"));
  c.world.rank = 3;
  CHECK_NOTHROW(murmur::validate(c));

  c.topology.edges = {{0, 1}, {1, 4}};
  CHECK_THROWS_WITH(murmur::validate(c), Catch::Contains("topology.edges[1]"));
  c.topology.edges = {{0, 1}, {1, 2}, {2, 3}, {3, 0}};
  CHECK_NOTHROW(murmur::validate(c));
  c.topology.matrix = {{1.0}};
  CHECK_THROWS_WITH(murmur::validate(c), Catch::Contains("topology.matrix: expected 4x4"));

  // Every broken rule is reported at once.
  c.world.rank = 9;
  CHECK_THROWS_WITH(murmur::validate(c), Catch::Contains("world.rank") &&
                                             Catch::Contains("topology.matrix"));
}

TEST_CASE("a name is checked against the names its room registered", "[config]") {
  // model.name's names are registered by nn's model table, which test_core does not link; a
  // key nobody registered takes any name (its owner refuses it where it is linked).
  CHECK(load_config_string("data: {partition: anything}", "run.yaml").data.partition == "anything");
  // model.name is registered at the top of this file, as nn/model.cc does.
  CHECK(murmur::registered_names("model.name") == std::vector<std::string>{"mlp", "cnn", "logreg"});
  murmur::register_names("test.key", {"a"});
  murmur::register_names("test.key", {"b"});
  CHECK(murmur::registered_names("test.key") == std::vector<std::string>{"a", "b"});
  CHECK(murmur::registered_names("no.such.key").empty());
}

TEST_CASE("to_yaml and to_json write every field and round-trip", "[config]") {
  ExperimentConfig c;
  c.run.name = "true";  // strings that look like other types must stay strings
  c.run.out = "";
  c.run.seed = 18446744073709551615ULL;
  c.model.hidden = {};
  c.model.dropout = 0.1 + 0.2;  // not exactly representable in short decimal
  c.data.mean = -1e-300;
  c.transport.peers = {"127.0.0.1:5000", "null", "3"};
  c.train.max_steps = std::int64_t{1} << 45;
  c.topology.edges = {{0, 1}, {}};
  c.topology.matrix = {{1.0 / 3, 2.0 / 3}, {2.0 / 3, 1.0 / 3}};
  c.data.normalize = false;

  const std::string yaml = murmur::to_yaml(c);
  INFO(yaml);
  const ExperimentConfig back = load_config_string(yaml, "resolved.yaml");
  CHECK(murmur::to_json(back) == murmur::to_json(c));
  CHECK(back.model.dropout == c.model.dropout);
  CHECK(back.topology.matrix == c.topology.matrix);
  CHECK(back.run.seed == c.run.seed);
  CHECK(back.run.name == "true");

  const nlohmann::json j = murmur::to_json(c);
  CHECK(j["run"]["seed"].get<std::uint64_t>() == 18446744073709551615ULL);
  CHECK(j["train"]["optimizer"]["lr"] == 0.05);
  CHECK(j["algorithm"]["compressor"]["name"] == "none");
  CHECK(j["transport"]["peers"].size() == 3);
  CHECK(j.size() == 11);  // run model data train eval checkpoint world transport topology algorithm network
  CHECK(j.contains("network"));
  CHECK(j["data"]["synthetic"].size() == 6);

  // config.json loads back too (JSON is YAML): its integer-keyed maps come with quoted keys.
  c.network.stragglers = {{3, 2.0}, {0, 4.5}};
  const ExperimentConfig from_json = load_config_string(murmur::to_json(c).dump(), "config.json");
  CHECK(from_json.network.stragglers == c.network.stragglers);
  CHECK(murmur::to_json(from_json) == murmur::to_json(c));
  CHECK_THROWS_WITH(load_config_string(R"({"network": {"stragglers": {"x": 2.0}}})", "config.json"),
                    Catch::Contains("network.stragglers.x: expected an integer"));
}

TEST_CASE("every shipped config in configs/ loads, validates and round-trips", "[config]") {
  const std::filesystem::path dir = std::filesystem::path(MURMUR_SOURCE_DIR) / "configs";
  if (!std::filesystem::exists(dir)) MURMUR_SKIP("no configs/ directory");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path().string());
    const ExperimentConfig c = murmur::load_config(entry.path());
    CHECK_NOTHROW(murmur::validate(c));
    CHECK(murmur::to_json(load_config_string(murmur::to_yaml(c), "resolved")) == murmur::to_json(c));
  }
}
