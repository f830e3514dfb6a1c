// The end of a 4-peer run as a PyTorch user meets it: rank<r>/final.safetensors holds the model's
// state_dict and nothing else, so load_state_dict(strict=True) takes it, and the resume state is
// in final.resume.safetensors beside it, from which the run, run again, resumes. The peers run as
// threads over inproc, as murmur-sim runs them.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/safetensors.h"
#include "runtime/peer.h"
#include "tests/runtime/test_util.h"
#include "transport/inproc/transport.h"

using murmur::testing::TempDir;

namespace {

constexpr int kPeers = 4;

murmur::ExperimentConfig four_peers() {
  murmur::ExperimentConfig c;
  c.run.threads = 1;
  c.run.log_every = 4;
  c.data.name = "synthetic";
  c.data.synthetic.train_size = 1024;
  c.data.synthetic.test_size = 256;
  c.model.hidden = {32};
  c.train.epochs = 2;  // 1024 / 4 peers / 32 = 8 steps an epoch
  c.train.batch_size = 32;
  c.world.size = kPeers;
  c.transport.backend = "inproc";
  // Push-sum keeps an array and a scalar of its own, and SGD its momentum: resume state that the
  // model file must not hold.
  c.algorithm.name = "sgp";
  c.topology.graph = "exponential";
  return c;
}

// Runs the peers of `config` as threads into `out`; every one must finish.
std::vector<murmur::runtime::PeerResult> run_world(const murmur::ExperimentConfig& config,
                                                   const std::filesystem::path& out) {
  auto transports = murmur::transport::inproc::make_world(kPeers);
  std::vector<murmur::runtime::PeerResult> results(kPeers);
  std::vector<std::string> errors(kPeers);
  std::vector<std::thread> threads;
  for (int r = 0; r < kPeers; ++r) {
    std::shared_ptr<murmur::transport::Transport> mine(std::move(transports[static_cast<std::size_t>(r)]));
    threads.emplace_back([&, r, mine = std::move(mine)]() mutable {
      auto own = config;
      own.world.rank = r;
      murmur::runtime::PeerOptions options;
      options.out = out;
      options.local_peers = kPeers;
      options.transport = std::move(mine);
      options.install_signal_handlers = false;
      try {
        results[static_cast<std::size_t>(r)] = murmur::runtime::run_peer(own, options);
      } catch (const std::exception& e) {  // drops the transport: the others see PeerLost
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kPeers; ++r) {
    INFO("rank " << r);
    REQUIRE(errors[static_cast<std::size_t>(r)].empty());
  }
  return results;
}

std::filesystem::path rank_dir(const std::filesystem::path& out, int r) {
  return out / ("rank" + std::to_string(r));
}

std::set<std::string> tensor_names(const std::filesystem::path& file) {
  const auto names = murmur::Safetensors::read(file).names();
  return {names.begin(), names.end()};
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

int step_lines(const std::filesystem::path& metrics) {
  int n = 0;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) n += nlohmann::json::parse(line)["kind"] == "step";
  return n;
}

}  // namespace

TEST_CASE("the final model file of a 4-peer run holds the model's state_dict alone, and the run resumes from the pair",
          "[runtime]") {
  TempDir dir;
  const auto config = four_peers();
  for (const auto& result : run_world(config, dir.path())) CHECK(result.steps == 16);

  // What torch.nn names an MLP of two Linear layers fc1, fc2: nothing more, nothing less.
  const std::set<std::string> state_dict{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  std::vector<std::string> models(kPeers);
  for (int r = 0; r < kPeers; ++r) {
    INFO("rank " << r);
    const auto d = rank_dir(dir.path(), r);
    CHECK(tensor_names(d / "final.safetensors") == state_dict);
    // Beside it, the resume checkpoint of the same step: the model and the resume state.
    const auto resume = tensor_names(d / "final.resume.safetensors");
    for (const auto& name : state_dict) CHECK(resume.count(name) == 1);
    CHECK(resume.count("murmur.optimizer.momentum") == 1);
    CHECK(resume.count("murmur.algorithm.sgp.x") == 1);
    models[static_cast<std::size_t>(r)] = read_all(d / "final.safetensors");
    std::filesystem::remove(d / "metrics.jsonl");
  }

  // Run again: every peer resumes from its final pair at step 16 and trains no further (a peer
  // that started over would log steps), and writes the same final model.
  for (const auto& result : run_world(config, dir.path())) CHECK(result.steps == 16);
  for (int r = 0; r < kPeers; ++r) {
    INFO("rank " << r);
    const auto d = rank_dir(dir.path(), r);
    CHECK(step_lines(d / "metrics.jsonl") == 0);
    CHECK(read_all(d / "final.safetensors") == models[static_cast<std::size_t>(r)]);
  }
}
