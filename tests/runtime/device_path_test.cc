// What a GPU peer does around its model, run on the CPU (run.device: staged_cpu): every transfer
// staged through the device's staging buffers in pieces, the arithmetic through the op table,
// the resume state copied around checkpoints. It must train bit for bit as the CPU path does,
// resume as exactly, and average across peer processes to the same figures.
#include <catch2/catch.hpp>

#include <fstream>
#include <cstring>
#include <iterator>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "runtime/peer.h"
#include "tests/runtime/test_util.h"

using murmur::testing::binary;
using murmur::testing::run_command;
using murmur::testing::TempDir;

namespace {

murmur::ExperimentConfig synthetic_config(const std::string& device) {
  murmur::ExperimentConfig c;
  c.run.threads = 1;
  c.run.log_every = 10;
  c.run.device = device;
  c.data.name = "synthetic";
  c.data.synthetic.train_size = 2048;
  c.data.synthetic.test_size = 512;
  c.model.hidden = {32};
  c.train.epochs = 2;
  c.train.batch_size = 32;
  c.train.optimizer.name = "adamw";  // two state arrays to carry through checkpoints
  c.train.optimizer.lr = 0.01;
  return c;
}

// The tensors of a checkpoint (of final.resume.safetensors: the model and the resume state),
// without its metadata: the config in the metadata names the device.
std::vector<float> tensors(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  // Everything after the JSON header: the data section, all tensors in file order.
  REQUIRE(bytes.size() > 8);
  std::uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  REQUIRE(bytes.size() >= 8 + header);
  std::vector<float> out((bytes.size() - 8 - header) / sizeof(float));
  std::memcpy(out.data(), bytes.data() + 8 + header, out.size() * sizeof(float));
  return out;
}

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("one peer on staged_cpu trains and resumes bit for bit as on cpu", "[runtime][device]") {
  TempDir cpu_run, staged_run, resumed_run;
  murmur::runtime::PeerOptions options;
  options.out = cpu_run.path();
  murmur::runtime::run_peer(synthetic_config("cpu"), options);
  options.out = staged_run.path();
  const auto staged = synthetic_config("staged_cpu");
  murmur::runtime::run_peer(staged, options);
  const auto want = tensors(cpu_run.path() / "rank0/final.resume.safetensors");
  const auto want_model = tensors(cpu_run.path() / "rank0/final.safetensors");
  REQUIRE(want_model.size() > 1000);
  REQUIRE(want.size() > want_model.size());  // the AdamW moments besides the model
  CHECK(tensors(staged_run.path() / "rank0/final.resume.safetensors") == want);
  CHECK(tensors(staged_run.path() / "rank0/final.safetensors") == want_model);

  // Cut at a checkpoint and resumed: the AdamW moments come back through the device's copies.
  auto cut = staged;
  cut.checkpoint.every_steps = 20;
  options.out = resumed_run.path();
  murmur::runtime::run_peer(cut, options);
  std::filesystem::remove(resumed_run.path() / "rank0/final.safetensors");
  std::filesystem::remove(resumed_run.path() / "rank0/final.resume.safetensors");
  std::filesystem::remove(resumed_run.path() / "rank0/metrics.jsonl");
  const auto resumed = murmur::runtime::run_peer(cut, options);
  CHECK(resumed.steps == 128);
  CHECK(tensors(resumed_run.path() / "rank0/final.resume.safetensors") == want);
  CHECK(tensors(resumed_run.path() / "rank0/final.safetensors") == want_model);
}

TEST_CASE("peers on staged_cpu average to the figures of peers on cpu", "[runtime][device][multiproc]") {
  TempDir dir;
  const auto config = dir.path() / "synthetic.yaml";
  std::ofstream(config) << R"(run: {threads: 1, log_every: 50}
data:
  name: synthetic
  synthetic: {train_size: 2048, test_size: 512, height: 8, width: 8}
model: {hidden: [32]}
train: {epochs: 2, batch_size: 32}
transport: {connect_timeout_ms: 20000, recv_timeout_ms: 20000, chunk_bytes: 4096}
)";
  const std::string launcher =
      std::string(MURMUR_SOURCE_DIR) + "/tools/murmur-launch --peer " + binary("murmur-peer");
  const auto [name, extra] = GENERATE(table<std::string, std::string>({
      {"dpsgd", "--set topology.graph=ring"},
      {"sgp", "--set topology.graph=exponential"},
      {"allreduce", ""},
  }));
  CAPTURE(name);
  nlohmann::json figures[2];
  const char* devices[] = {"cpu", "staged_cpu"};
  for (int d = 0; d < 2; ++d) {
    const auto out = dir.path() / (name + devices[d]);
    auto r = run_command(launcher + " -n 3 " + config.string() + " --set algorithm.name=" + name +
                         " " + extra + " --set run.device=" + devices[d] + " --out " + out.string());
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    figures[d] = read_json(out / "summary.json");
  }
  for (int r = 0; r < 3; ++r) {
    CHECK(figures[1]["peers"][r]["test_loss"] == figures[0]["peers"][r]["test_loss"]);
  }
  CHECK(figures[1]["average_model"]["test_loss"] == figures[0]["average_model"]["test_loss"]);
  CHECK(figures[1]["consensus_distance"] == figures[0]["consensus_distance"]);
}
