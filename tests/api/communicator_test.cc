// murmur/murmur.h as a program uses it: peers that are separate processes, each with parameters
// of its own, averaged by every algorithm of configs/ over every backend; the model check; the
// primitives; the run directory it leaves.
#include "api/murmur/murmur.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/api/peers.h"
#include "tests/runtime/test_util.h"
#include "tests/transport/backends.h"

namespace {

using murmur::Buffer;
using murmur::Communicator;
using murmur::testing::failed;
using murmur::testing::run_peers;
using murmur::testing::TempDir;

constexpr std::size_t kFloats = 1000;

// Peer r's starting parameters: different on every peer, the mean known.
std::vector<float> start_of(int rank) {
  std::vector<float> x(kFloats);
  for (std::size_t i = 0; i < kFloats; ++i) x[i] = static_cast<float>(rank * 10 + (i % 7));
  return x;
}

float mean_at(std::size_t i, int n) {
  double sum = 0;
  for (int r = 0; r < n; ++r) sum += start_of(r)[i];
  return static_cast<float>(sum / n);
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

nlohmann::json read_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

// The YAML of configs/NAME.yaml without its world section (the harness gives the world).
std::string config_file_text(const std::string& name) {
  std::ifstream in(std::string(MURMUR_SOURCE_DIR) + "/configs/" + name + ".yaml");
  std::string text, line;
  bool in_world = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') in_world = line.rfind("world:", 0) == 0;
    if (!in_world) text += line + "\n";
  }
  return text;
}

}  // namespace

TEST_CASE("api: every algorithm of configs/ averages a program's parameters", "[api]") {
  // 4 peers, no local change: what the averaging does alone. Every algorithm keeps the mean,
  // and after average() every peer holds it, bitwise the same.
  for (const std::string name : {"ring", "allreduce", "exponential", "one_peer_exponential", "gossip_random",
                                 "sgp", "adpsgd", "local_sgd", "diloco", "choco_topk", "easgd", "torus"}) {
    INFO(name);
    TempDir dir;
    const int n = name == "torus" ? 9 : 4;  // a torus needs rows and columns of 3 at least
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    const auto errors = run_peers(n, config_file_text(name), dir.path(), [n, &all](Communicator& comm) {
      std::vector<float> x = start_of(comm.rank());
      comm.attach(std::vector<Buffer>{{x.data(), x.size()}});
      for (int step = 1; step <= 12; ++step) comm.after_step(step, 1.0, 8);
      comm.flush();
      const murmur::Average a = comm.average();
      require(a.ranks == all, "the average is not over every rank");
      for (std::size_t i = 0; i < kFloats; ++i) {
        require(std::abs(x[i] - mean_at(i, n)) < 1e-3f,
                fmt::format("x[{}] = {} after the average, the mean is {}", i, x[i], mean_at(i, n)));
      }
      murmur::Evaluation e;
      if (a.evaluator) e.accuracy = 0.75;
      const std::vector<float> averaged = x;
      comm.finish(e);
      // finish() completes nothing more into the parameters (push-sum's x / w stays out).
      require(x == averaged, "finish() changed the averaged parameters");
    });
    CHECK(failed(errors) == "");
    const auto summary = read_json(dir.path() / "summary.json");
    CHECK(summary["peers"].size() == static_cast<std::size_t>(n));
    CHECK(summary["average_model"]["test_accuracy"] == Approx(0.75));
    CHECK(summary["peers"][1]["steps"] == 12);
    CHECK(summary["peers"][1]["bytes_sent"].get<double>() > 0);
    // The gossip algorithms had the peers apart when they ended; the exact ones did not.
    CHECK(std::isfinite(summary["consensus_distance"].get<double>()));
  }
}

TEST_CASE("api: a program's parameters move over every backend, on one buffer or several", "[api]") {
  for (const std::string& backend : murmur::transport::testing::built_backends()) {
    if (backend == "inproc") continue;  // threads of one process: a Communicator is one per process
    INFO(backend);
    TempDir dir;
    murmur::testing::PeersOptions o;
    o.backend = backend;
    const auto errors = run_peers(3, config_file_text("ring"), dir.path(), [](Communicator& comm) {
      // Two buffers: copied into one arena around each averaging, and back.
      std::vector<float> x = start_of(comm.rank());
      std::vector<float> head(x.begin(), x.begin() + 300), tail(x.begin() + 300, x.end());
      comm.attach(std::vector<Buffer>{{head.data(), head.size()}, {tail.data(), tail.size()}});
      for (int step = 1; step <= 40; ++step) comm.after_step(step);
      // A ring of 3 with weights 1/3 is the exact average in one round.
      for (std::size_t i = 0; i < kFloats; ++i) {
        const float got = i < 300 ? head[i] : tail[i - 300];
        require(std::abs(got - mean_at(i, 3)) < 1e-3f, fmt::format("x[{}] = {}, want {}", i, got, mean_at(i, 3)));
      }
      comm.average();
      comm.finish();
    }, o);
    CHECK(failed(errors) == "");
  }
}

TEST_CASE("api: a peer with another model is refused on every peer, naming the first difference", "[api]") {
  TempDir dir;
  const auto errors = run_peers(4, config_file_text("ring"), dir.path(), [](Communicator& comm) {
    std::vector<float> x(100);
    std::vector<std::string> described = {"fc1.weight [10, 8] float32", "fc1.bias [10] float32",
                                          "fc2.weight [2, 10] float32"};
    if (comm.rank() == 2) described[1] = "fc1.bias [12] float32";
    comm.attach(std::vector<Buffer>{{x.data(), x.size()}}, described);
  });
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK_THAT(errors[r], Catch::Contains("the model differs between peers") &&
                              Catch::Contains("tensor 2 of 3: rank 2 has `fc1.bias [12] float32` "
                                              "where rank 0 has `fc1.bias [10] float32`"));
  }
  // Without descriptions, each buffer's size stands for it.
  TempDir sizes;
  const auto by_size = run_peers(3, config_file_text("ring"), sizes.path(), [](Communicator& comm) {
    std::vector<float> a(10), b(comm.rank() == 1 ? 21 : 20);
    comm.attach(std::vector<Buffer>{{a.data(), a.size()}, {b.data(), b.size()}});
  });
  for (int r = 0; r < 3; ++r) {
    CHECK_THAT(by_size[r], Catch::Contains("rank 1 has `buffer 1: 21 floats` where rank 0 has `buffer 1: 20 floats`"));
  }
}

TEST_CASE("api: the primitives: neighbor_average, allreduce, broadcast, barrier", "[api]") {
  TempDir dir;
  const int n = 5;
  const auto errors = run_peers(n, config_file_text("ring"), dir.path(), [n](Communicator& comm) {
    const int r = comm.rank();
    // One round on the ring, uniform weights: the mean of this rank and its two neighbors.
    std::vector<float> x = {static_cast<float>(r), static_cast<float>(r * r)};
    comm.neighbor_average({x.data(), x.size()});
    const int left = (r + n - 1) % n, right = (r + 1) % n;
    require(std::abs(x[0] - (left + r + right) / 3.0f) < 1e-5f, fmt::format("neighbor_average: {}", x[0]));
    require(std::abs(x[1] - (left * left + r * r + right * right) / 3.0f) < 1e-4f, "neighbor_average of x^2");
    const murmur::Neighbors mine = comm.neighbors(0);
    require(mine.recv_from.size() == 2 && std::abs(mine.self_weight - 1.0 / 3) < 1e-12, "neighbors()");

    std::vector<float> y = {static_cast<float>(r), 1.0f};
    comm.allreduce({y.data(), y.size()}, /*mean=*/false);
    require(y[0] == n * (n - 1) / 2.0f && y[1] == n, fmt::format("allreduce sum: {} {}", y[0], y[1]));
    std::vector<float> z = {static_cast<float>(r)};
    comm.allreduce({z.data(), 1});
    require(std::abs(z[0] - (n - 1) / 2.0f) < 1e-6f, "allreduce mean");

    std::vector<float> w = {static_cast<float>(r + 100), -static_cast<float>(r)};
    comm.broadcast({w.data(), w.size()}, 3);
    require(w[0] == 103 && w[1] == -3, fmt::format("broadcast from 3: {} {}", w[0], w[1]));
    comm.barrier();
  });
  CHECK(failed(errors) == "");
}

TEST_CASE("api: neighbor_average refuses weights whose rows do not sum to 1", "[api]") {
  // Push-sum weights on a directed graph whose in- and out-degrees differ: column-stochastic only.
  TempDir dir;
  const std::string yaml =
      "algorithm: {name: sgp}\ntopology: {graph: custom, directed: true, edges: [[0, 1], [0, 2], [1, 0], [2, 0]]}\n";
  const auto errors = run_peers(3, yaml, dir.path(), [](Communicator& comm) {
    std::vector<float> x = {1.0f};
    comm.neighbor_average({x.data(), 1});
  });
  bool named = false;
  for (const auto& e : errors) named |= e.find("neighbor_average") != std::string::npos && e.find("sums to") != std::string::npos;
  CHECK(named);
}

TEST_CASE("api: the run directory is murmur-peer's: config, metrics, results, summary", "[api]") {
  TempDir dir;
  const auto errors = run_peers(2, config_file_text("allreduce"), dir.path(), [](Communicator& comm) {
    std::vector<float> x = start_of(comm.rank());
    comm.attach(std::vector<Buffer>{{x.data(), x.size()}});
    require(comm.agree_start(comm.rank() == 0 ? 7 : 5) == 5, "agree_start: the lowest step");
    for (int step = 6; step <= 105; ++step) comm.after_step(step, 0.5, 64);
    comm.log_eval({0.6, 1.2}, 1.0);
    const murmur::Stats s = comm.stats();
    require(s.step == 105 && s.bytes_sent > 0 && s.comm_s > 0, "stats");
    comm.average();
    comm.finish({0.8, 0.9});
  });
  REQUIRE(failed(errors) == "");
  const auto& d = dir.path();
  CHECK(std::filesystem::exists(d / "config.yaml"));
  const auto summary = read_json(d / "summary.json");
  CHECK(summary["world_size"] == 2);
  CHECK(summary["average_model"]["test_accuracy"] == Approx(0.8));
  CHECK(summary["peers"][0]["test_accuracy"] == Approx(0.6));
  CHECK(summary["consensus_distance"] == Approx(0).margin(1e-6));  // allreduce: one model
  std::ifstream metrics(d / "rank1" / "metrics.jsonl");
  int steps = 0, evals = 0;
  for (std::string line; std::getline(metrics, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["kind"] == "step") {
      ++steps;
      CHECK(j["loss"] == Approx(0.5));
    }
    if (j["kind"] == "eval") ++evals;
  }
  CHECK(steps >= 1);  // run.log_every = 100: step 100, and the last at finish()
  CHECK(evals == 1);
}

TEST_CASE("api: a bad config and a bad $MURMUR_SET are errors naming what", "[api]") {
  TempDir dir;
  auto errors = run_peers(1, "algorithm: {nme: dpsgd}\n", dir.path(), [](Communicator&) {});
  CHECK_THAT(errors[0], Catch::Contains("algorithm.nme") && Catch::Contains("unknown key"));
  // Averaging gradients needs murmur-peer's backward: a program is told, not silently ignored.
  errors = run_peers(1, "algorithm: {name: allreduce, average: gradients}\n", dir.path(),
                     [](Communicator&) {});
  CHECK_THAT(errors[0], Catch::Contains("algorithm.average: gradients needs murmur-peer"));
  murmur::testing::PeersOptions o;
  o.environment = {"MURMUR_SET=algorithm.name=sgp"};
  errors = run_peers(1, "", dir.path(), [](Communicator&) {}, o);
  CHECK_THAT(errors[0], Catch::Contains("$MURMUR_SET") && Catch::Contains("JSON list"));
  o.environment = {R"(MURMUR_SET=["algorithm.name=sgp", "topology.graph=exponential"])"};
  errors = run_peers(1, "", dir.path(), [](Communicator& comm) {
    const auto config = nlohmann::json::parse(comm.config_json());
    require(config["algorithm"]["name"] == "sgp" && config["topology"]["graph"] == "exponential",
            "the launcher's overrides did not apply");
  }, o);
  CHECK(failed(errors) == "");
}
