// Time to accuracy from known metrics: the slowest peer decides, bytes add up over the peers, one
// clock for all, null when never reached; and the summary.json of a run with a target carries it.
#include "runtime/summary.h"

#include <fstream>
#include <limits>

#include <catch2/catch.hpp>

#include "tests/runtime/test_util.h"

using murmur::runtime::EvalPoint;
using murmur::runtime::time_to_accuracy;

namespace {

// Rank r started training at unix time 1000 + r (so time_s differs from the shared clock).
std::vector<std::vector<EvalPoint>> two_ranks() {
  return {{{100, 0.80, 10.0, 1010.0, 1000}, {200, 0.86, 20.0, 1020.0, 2000}, {300, 0.90, 30.0, 1030.0, 3000}},
          {{100, 0.82, 9.0, 1010.5, 1500}, {200, 0.84, 21.0, 1022.0, 2500}, {300, 0.88, 29.5, 1030.5, 3500}}};
}

}  // namespace

TEST_CASE("time to accuracy waits for the slowest peer", "[summary]") {
  const auto t = time_to_accuracy(two_ranks(), 0.85);
  REQUIRE(t.reached);
  CHECK(t.step == 300);  // at 200, rank 1 (0.84) is below 0.85 though rank 0 and the mean are above
  CHECK(t.accuracy == Approx(0.88));
  CHECK(t.bytes_sent == 3000 + 3500);
  // From the earliest start (unix 1000) to the later evaluation at step 300 (unix 1030.5).
  CHECK(t.time_s == Approx(30.5));
  CHECK(time_to_accuracy(two_ranks(), 0.80).step == 100);
  CHECK(time_to_accuracy(two_ranks(), 0.80).time_s == Approx(10.5));
}

TEST_CASE("time to accuracy: never reached, missing steps, no shared clock", "[summary]") {
  CHECK_FALSE(time_to_accuracy(two_ranks(), 0.95).reached);
  CHECK_FALSE(time_to_accuracy({}, 0.5).reached);
  CHECK_FALSE(time_to_accuracy(two_ranks(), 0).reached);  // no target

  auto ranks = two_ranks();
  ranks[1].erase(ranks[1].begin());  // step 100 evaluated on rank 0 only: not a common point
  CHECK(time_to_accuracy(ranks, 0.80).step == 200);

  ranks = two_ranks();
  for (auto& r : ranks) {
    for (auto& e : r) e.unix_s = 0;  // older metrics: the slowest peer's own time_s
  }
  CHECK(time_to_accuracy(ranks, 0.85).time_s == Approx(30.0));

  ranks = two_ranks();
  ranks[0][0].accuracy = std::numeric_limits<double>::quiet_NaN();  // diverged at step 100
  CHECK(time_to_accuracy(ranks, 0.5).step == 200);

  const auto j = murmur::runtime::time_to_accuracy_json(time_to_accuracy(two_ranks(), 0.95));
  CHECK(j["target"] == 0.95);
  CHECK(j["time_s"].is_null());
  CHECK(j["bytes_sent"].is_null());
}

TEST_CASE("summary.json carries time_to_accuracy read from the metrics files", "[summary]") {
  murmur::testing::TempDir dir;
  const char* lines[] = {
      R"({"kind":"step","rank":R,"step":100,"time_s":9.0,"loss":1.0,"bytes_sent":900})",
      R"({"kind":"eval","rank":R,"step":100,"time_s":10.0,"test_accuracy":0.5,"bytes_sent":1000,"unix_s":110.0})",
      R"({"kind":"eval","rank":R,"step":200,"time_s":20.0,"test_accuracy":0.9,"bytes_sent":2000,"unix_s":120.0})",
      R"({"kind":"eval","rank":R,"step":300,"time_s":30.0,"test_acc)"};  // cut by a kill
  std::vector<murmur::runtime::PeerResult> peers(2);
  for (int r = 0; r < 2; ++r) {
    peers[r].rank = r;
    std::filesystem::create_directories(dir.path() / ("rank" + std::to_string(r)));
    std::ofstream out(dir.path() / ("rank" + std::to_string(r)) / "metrics.jsonl");
    for (std::string line : lines) out << line.replace(line.find(":R,") + 1, 1, std::to_string(r)) << "\n";
  }
  murmur::ExperimentConfig config;
  config.world.size = 2;
  config.eval.target_accuracy = 0.85;
  const auto summary = murmur::runtime::make_summary(config, peers, 30.0, dir.path());
  REQUIRE(summary.contains("time_to_accuracy"));
  CHECK(summary["time_to_accuracy"]["step"] == 200);
  CHECK(summary["time_to_accuracy"]["bytes_sent"] == 4000);
  CHECK(summary["time_to_accuracy"]["time_s"].get<double>() == Approx(20.0));
  config.eval.target_accuracy = 0;
  CHECK_FALSE(murmur::runtime::make_summary(config, peers, 30.0, dir.path()).contains("time_to_accuracy"));
}

TEST_CASE("the average model of the summary is the one over the most ranks", "[summary]") {
  // Rank 0 was killed and restarted after the others had finished: it averaged alone, while
  // rank 1 evaluated the survivors' average of ranks 1, 2 and 3.
  std::vector<murmur::runtime::PeerResult> peers(4);
  for (int r = 0; r < 4; ++r) peers[r].rank = r;
  peers[0].has_average = true;
  peers[0].average_test_accuracy = 0.80;
  peers[0].average_ranks = {0};
  peers[1].has_average = true;
  peers[1].average_test_accuracy = 0.84;
  peers[1].average_ranks = {1, 2, 3};
  peers[1].consensus_distance = 0.5;
  murmur::ExperimentConfig config;
  config.world.size = 4;
  const auto summary = murmur::runtime::make_summary(config, peers, 30.0, {});
  CHECK(summary["average_model"]["test_accuracy"].get<double>() == Approx(0.84));
  CHECK(summary["average_model"]["ranks"] == nlohmann::json::array({1, 2, 3}));
  CHECK(summary["consensus_distance"].get<double>() == Approx(0.5));
}
