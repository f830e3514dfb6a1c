// murmur-topo end to end: its --json figures match numpy.linalg on the matrix it prints, its
// --config mode reads a YAML file, --dot writes DOT (and PNG where graphviz is installed), and a
// world size a graph cannot take exits nonzero with the reason; --list prints the registry.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/skip.h"
#include "tests/topology/python_helper.h"
#include "topology/registry.h"

namespace fs = std::filesystem;
using namespace murmur::topology;
using namespace murmur::topology::testing;

namespace {

// The binary is built by the tools target; a test-only build may lack it.
std::string topo_binary() { return std::string(MURMUR_BINARY_DIR) + "/bin/murmur-topo"; }

bool have_binary() { return fs::exists(topo_binary()); }

constexpr const char* kNumpyCheck = R"(
import json, sys
import numpy as np
j = json.load(open(sys.argv[1]))
w = np.array(j["matrix"], dtype=float)
ev = sorted(np.abs(np.linalg.eigvals(w)), reverse=True)
print(json.dumps({"n": w.shape[0], "cols": w.shape[1], "slem": float(ev[1]) if len(ev) > 1 else 0.0,
                  "rows_ok": bool(np.allclose(w.sum(axis=1), 1, atol=1e-9)),
                  "cols_ok": bool(np.allclose(w.sum(axis=0), 1, atol=1e-9))}))
)";

}  // namespace

TEST_CASE("murmur-topo --json figures match numpy.linalg", "[topology][numpy]") {
  if (!have_binary()) MURMUR_SKIP("no murmur-topo (build target murmur-topo)");
  if (!have_numpy()) MURMUR_SKIP("no numpy");
  const char* const cases[] = {
      "--graph ring --peers 8",
      "--graph ring --peers 9 --weights metropolis",
      "--graph ring_directed --peers 7",
      "--graph torus --peers 12",
      "--graph hypercube --peers 16",
      "--graph exponential --peers 12",
      "--graph complete --peers 5",
      "--graph one_peer_exponential --peers 8",
      "--graph one_peer_exponential --peers 12",
      "--graph random_matching --peers 10 --seed 3",
      "--graph random_kout --peers 9 --k 2 --seed 4 --rounds 3",
  };
  ScratchDir dir("topo-tool");
  for (const char* args : cases) {
    INFO("murmur-topo --json " << args);
    const fs::path out = dir.path() / "topo.json";
    const CommandResult r = run_command(topo_binary() + " --json " + args, dir.path());
    INFO(r.err);
    REQUIRE(r.code == 0);
    write_file(out, r.out);
    const auto j = nlohmann::json::parse(r.out);
    const auto check = run_python(kNumpyCheck, quoted(out), dir.path());
    REQUIRE(check.has_value());
    const auto numpy = nlohmann::json::parse(*check);
    REQUIRE(numpy["n"] == j["peers"]);
    REQUIRE(numpy["cols"] == j["peers"]);
    REQUIRE(j["second_eigenvalue"].get<double>() ==
            Approx(numpy["slem"].get<double>()).margin(1e-9));
    REQUIRE(j["spectral_gap"].get<double>() ==
            Approx(1 - numpy["slem"].get<double>()).margin(1e-9));
    REQUIRE(j["row_stochastic"] == numpy["rows_ok"]);
    REQUIRE(j["column_stochastic"] == numpy["cols_ok"]);
    REQUIRE(j["column_stochastic"] == true);  // every built-in scheme keeps the mass
  }
}

TEST_CASE("murmur-topo reads a config, writes DOT and rejects impossible worlds", "[topology]") {
  if (!have_binary()) MURMUR_SKIP("no murmur-topo (build target murmur-topo)");
  ScratchDir dir("topo-config");
  const fs::path yaml = dir.path() / "run.yaml";
  write_file(yaml,
             "world:\n  size: 4\n"
             "topology:\n  graph: custom\n  weights: metropolis\n"
             "  edges: [[0, 1], [1, 2], [2, 3], [3, 0]]\n");
  const fs::path dot = dir.path() / "graph.dot";
  const CommandResult r = run_command(
      topo_binary() + " --json --config " + quoted(yaml) + " --dot " + quoted(dot),
      dir.path());
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["peers"] == 4);
  REQUIRE(j["second_eigenvalue"].get<double>() == Approx(1.0 / 3));  // a 4-ring: W = 1/3 each
  REQUIRE(j["rounds_to_10x"] == 3);
  const std::string text = read_file(dot);
  REQUIRE(text.rfind("graph", 0) == 0);
  REQUIRE(text.find("0 -- 1") != std::string::npos);
  if (std::system("command -v dot >/dev/null 2>&1") == 0) {
    REQUIRE(fs::file_size(dir.path() / "graph.png") > 0);
  } else {
    WARN("graphviz `dot` not installed: no PNG to check");
  }

  const CommandResult bad = run_command(topo_binary() + " --graph hypercube --peers 6", dir.path());
  REQUIRE(bad.code == 1);
  REQUIRE_THAT(bad.err, Catch::Contains("hypercube needs world.size to be a power of 2"));
  REQUIRE(run_command(topo_binary(), dir.path()).code == 2);
}

TEST_CASE("murmur-topo --list prints every registered graph and weights scheme", "[topology]") {
  if (!have_binary()) MURMUR_SKIP("no murmur-topo (build target murmur-topo)");
  ScratchDir dir("topo-list");
  const CommandResult r = run_command(topo_binary() + " --list --json", dir.path());
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["graphs"].size() == graphs().size());
  for (std::size_t i = 0; i < graphs().size(); ++i) {
    const GraphInfo& row = *graphs()[i];
    const auto& g = j["graphs"][i];
    INFO(row.name);
    REQUIRE(g["name"] == row.name);
    REQUIRE(g["summary"] == row.summary);
    REQUIRE(g["time_varying"] == row.time_varying);
    murmur::TopologyConfig one_way;
    one_way.directed = true;
    if (row.directed(murmur::TopologyConfig{}) == row.directed(one_way)) {
      REQUIRE(g["directed"] == row.directed(one_way));
    } else {
      REQUIRE(g["directed"].is_null());  // topology.directed decides
    }
  }
  REQUIRE(j["weights"].size() == weights_schemes().size());
  for (std::size_t i = 0; i < weights_schemes().size(); ++i) {
    REQUIRE(j["weights"][i]["name"] == weights_schemes()[i]->name);
    REQUIRE(j["weights"][i]["summary"] == weights_schemes()[i]->summary);
  }

  const CommandResult text = run_command(topo_binary() + " --list", dir.path());
  REQUIRE(text.code == 0);
  // One line per graph and scheme (the averaging algorithms' lines follow: optimizers' test).
  std::size_t rows = 0;
  std::istringstream lines(text.out);
  for (std::string line; std::getline(lines, line);) {
    rows += line.rfind("graph ", 0) == 0 || line.rfind("weights ", 0) == 0;
  }
  REQUIRE(rows == graphs().size() + weights_schemes().size());
  for (std::string_view name : graph_names()) {
    REQUIRE_THAT(text.out, Catch::Contains(std::string(name)));
  }
}
