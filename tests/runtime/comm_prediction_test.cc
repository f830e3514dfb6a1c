// The communication prediction: an algorithm's plan priced by a cost model (by hand here), the
// emulated network's latency and rate added, summary.json's "comm_prediction" with and without
// a cost model, and, end to end, 3 launched peers whose summary predicts the bytes they sent.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

#include "runtime/comm_prediction.h"
#include "tests/runtime/launch_util.h"
#include "transport/cost_model.h"

namespace murmur::runtime {
namespace {

using Catch::Matchers::Contains;
using murmur::testing::TempDir;

// One band for every size: alpha 100 us, beta 1 ns a byte (8 Gbit/s).
transport::CostModel flat_model() {
  transport::CostModel m;
  m.links["tcp"][4].bands.push_back({0, 0, 100e-6, 1e-9, 2, 0});
  return m;
}

ExperimentConfig ring4() {
  ExperimentConfig c;
  c.world.size = 4;
  c.algorithm.name = "dpsgd";
  c.topology.graph = "ring";
  c.transport.backend = "tcp";
  return c;
}

TEST_CASE("a prediction is the plan priced by the fit", "[runtime][cost]") {
  // D-PSGD on a ring of 4, 1000 floats: each step one phase of 2 x 4000 bytes.
  const CommPrediction p = predict_comm(ring4(), flat_model(), "tcp", 1000, 10);
  CHECK(p.fitted_ranks == 4);
  CHECK(p.seconds == Approx(10 * (100e-6 + 1e-9 * 8000)));
  CHECK(p.bytes_sent == Approx(10 * 8000 + 6 * 1000));  // and the final average
  // The allreduce every step, direct (segments of 1000 bytes, one piece): 2 phases of 3 x 1000
  // bytes; in pieces of 500 bytes, the ring: 6 phases of 2 pieces, pipelined, 7 piece times.
  ExperimentConfig c = ring4();
  c.algorithm.name = "allreduce";
  CHECK(predict_comm(c, flat_model(), "tcp", 1000, 10).seconds == Approx(10 * 2 * (100e-6 + 1e-9 * 3000)));
  c.transport.chunk_bytes = 500;
  CHECK(predict_comm(c, flat_model(), "tcp", 1000, 10).seconds ==
        Approx(10 * 7 * (100e-6 + 1e-9 * 500)));
  c.transport.chunk_bytes = ExperimentConfig{}.transport.chunk_bytes;
  // 8 peers use the fit at 4, the nearest count below.
  c.world.size = 8;
  CHECK(predict_comm(c, flat_model(), "tcp", 1000, 10).fitted_ranks == 4);
  CHECK_THROWS_WITH(predict_comm(c, flat_model(), "ucx", 1000, 10), Contains("ucx"));
}

TEST_CASE("the emulated network adds its latency and bounds the rate", "[runtime][cost]") {
  ExperimentConfig c = ring4();
  c.network.latency = "5ms";
  // 8 ns a byte on the wire, slower than the fit's 1 ns. TCP's payload is 1448 bytes of each
  // 1514-byte frame: 8 x 1514 / 1448 = 8.364641 ns a byte of payload.
  c.network.bandwidth = "1gbit";
  const transport::LinkCost link = run_link(c, flat_model());
  CHECK(link.latency_s == Approx(5e-3));
  CHECK(link.bands[0].alpha_s == Approx(100e-6));
  CHECK(link.bands[0].beta_s_per_byte == Approx(8.364641e-9));
  // D-PSGD's step: one phase of 8000 bytes behind the latency.
  CHECK(predict_comm(c, flat_model(), "tcp", 1000, 10).seconds ==
        Approx(10 * (5e-3 + 100e-6 + 8.364641e-9 * 8000)));
  c.network.bandwidth = "100gbit";  // faster than the fit: the fit's rate stays
  c.network.latency = "250us";
  CHECK(run_link(c, flat_model()).bands[0].beta_s_per_byte == Approx(1e-9));
  CHECK(run_link(c, flat_model()).latency_s == Approx(250e-6));
}

TEST_CASE("the ring's pieces pipeline, and the model suggests a chunk size", "[runtime][cost]") {
  // The allreduce of 4 MiB over 4 ranks: segments of 1 MiB; 6 phases. Behind 5 ms at 1 Gbit/s
  // in pieces of 256 KiB (4 a segment): 6 x 5 ms + (6 + 4 - 1) x (100 us + 8.36 ns x 256 KiB),
  // 8.36 ns a byte of TCP payload (as above).
  ExperimentConfig c = ring4();
  c.algorithm.name = "allreduce";
  c.network.latency = "5ms";
  c.network.bandwidth = "1gbit";
  c.transport.chunk_bytes = 256 << 10;
  const std::size_t floats = 1 << 20;
  const CommPrediction p = predict_comm(c, flat_model(), "tcp", floats, 1);
  CHECK(p.plan.parts.at(0).chunks == 4);
  CHECK(p.seconds == Approx(6 * 5e-3 + 9 * (100e-6 + 8.364641e-9 * (256 << 10))));
  // The best of 64 KiB .. 64 MiB by the same formula: pieces of 64 KiB (16 a segment) cost
  // 6 x 5 ms + 21 x (100 us + 8.36 ns x 64 KiB), less than any larger piece.
  CHECK(p.suggested_chunk_bytes == 64 << 10);
  CHECK(p.seconds_at_suggested == Approx(6 * 5e-3 + 21 * (100e-6 + 8.364641e-9 * (64 << 10))));
  // With 50 ms a message the pieces' alpha outweighs the pipeline: whole segments.
  transport::CostModel slow = flat_model();
  slow.links["tcp"][4].bands[0].alpha_s = 50e-3;
  CHECK(predict_comm(c, slow, "tcp", floats, 1).suggested_chunk_bytes >= 1 << 20);
  // On the loopback (no network.*) the pieces do not pipeline: no suggestion.
  ExperimentConfig loopback = ring4();
  loopback.algorithm.name = "allreduce";
  CHECK(predict_comm(loopback, flat_model(), "tcp", floats, 1).suggested_chunk_bytes == 0);
  // D-PSGD's messages have no pieces: no suggestion.
  ExperimentConfig gossip = ring4();
  gossip.network = c.network;
  CHECK(predict_comm(gossip, flat_model(), "tcp", floats, 1).suggested_chunk_bytes == 0);
}

TEST_CASE("summary.json's comm_prediction", "[runtime][cost]") {
  TempDir dir;
  const auto file = dir.path() / "cost_model.json";
  const std::vector<nlohmann::json> peers{
      {{"rank", 0}, {"steps", 10}, {"parameters", 1000}, {"comm_s", 0.004}, {"bytes_sent", 80000}, {"backend", "tcp"}},
      {{"rank", 1}, {"steps", 10}, {"parameters", 1000}, {"comm_s", 0.002}, {"bytes_sent", 80000}, {"backend", "tcp"}},
      {{"rank", 2}, {"failed", true}},
      {{"rank", 3}, {"steps", 10}, {"parameters", 1000}, {"comm_s", 0.003}, {"bytes_sent", 80000}, {"backend", "tcp"}}};
  // No cost model: no prediction.
  CHECK(comm_prediction_json(ring4(), peers, file).is_null());
  transport::write_cost_model(file, flat_model());
  const nlohmann::json j = comm_prediction_json(ring4(), peers, file);
  INFO(j.dump());
  CHECK(j["predicted_comm_s"].get<double>() == Approx(10 * (100e-6 + 8000e-9)));
  CHECK(j["measured_comm_s"].get<double>() == Approx(0.003));  // the failed rank left out
  CHECK(j["ratio"].get<double>() == Approx(0.003 / (10 * 108e-6)));
  CHECK(j["predicted_bytes_sent"].get<double>() == Approx(80000 + 6000));
  CHECK(j["parts"].size() == 1);
  // One peer, or results without the model's size: nothing to predict.
  ExperimentConfig one = ring4();
  one.world.size = 1;
  CHECK(comm_prediction_json(one, peers, file).is_null());
  CHECK(comm_prediction_json(ring4(), {{{"rank", 0}, {"steps", 10}}}, file).is_null());
  // A backend the model has no fit for (a simulation over inproc): nothing either.
  nlohmann::json inproc = peers;
  for (auto& p : inproc) p["backend"] = "inproc";
  CHECK(comm_prediction_json(ring4(), inproc, file).is_null());
  // A file that is not a cost model: an error in the field, not a failed summary.
  std::ofstream(file) << R"({"murmur_cost_model": 7})";
  CHECK_THAT(comm_prediction_json(ring4(), peers, file)["error"].get<std::string>(),
             Contains("murmur_cost_model"));
}

TEST_CASE("a launched run's summary predicts the bytes its peers sent",
          "[runtime][cost][multiproc]") {
  TempDir dir;
  const auto model = dir.path() / "cost_model.json";
  transport::CostModel m;
  m.links["tcp"][2].bands.push_back({0, 0, 50e-6, 1e-9, 2, 0});
  transport::write_cost_model(model, m);
  ::setenv("MURMUR_COST_MODEL", model.c_str(), 1);
  const auto config = murmur::testing::synthetic_config(dir, R"(train: {epochs: 1, batch_size: 32}
topology: {graph: ring}
)");
  const auto figures = murmur::testing::launch_modes(
      dir, config, {"--set algorithm.name=dpsgd", "--set algorithm.name=allreduce",
                    "--set algorithm.name=local_sgd --set algorithm.local_steps=4"});
  ::unsetenv("MURMUR_COST_MODEL");
  for (const nlohmann::json& s : figures) {
    INFO(s.dump());
    REQUIRE(s.contains("comm_prediction"));
    const nlohmann::json& p = s["comm_prediction"];
    CHECK(p["fitted_ranks"] == 2);
    CHECK(p["predicted_comm_s"].get<double>() > 0);
    // The plan's bytes and the final average against the transport's count: the start's
    // agreement, the result gather and the frames' headers are not in the plan.
    const double predicted = p["predicted_bytes_sent"], measured = p["measured_bytes_sent"];
    CAPTURE(predicted, measured);
    CHECK(predicted <= measured);
    CHECK(predicted > 0.97 * measured);
  }
}

}  // namespace
}  // namespace murmur::runtime
