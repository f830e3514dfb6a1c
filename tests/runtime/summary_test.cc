// summary.json from a run directory: time to accuracy from known metrics (the slowest peer
// decides, bytes add up over the peers, one clock for all, null when never reached); peers
// without a valid result.json listed as failed with their exit codes; the widest average;
// and `murmur-peer --summarize` writing it from the command line.
#include "runtime/summary.h"

#include <fstream>
#include <numeric>
#include <limits>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "tests/runtime/test_util.h"

using murmur::runtime::EvalPoint;
using murmur::runtime::summarize_run;
using murmur::runtime::time_to_accuracy;

namespace {

// Rank r started training at unix time 1000 + r (so time_s differs from the shared clock).
std::vector<std::vector<EvalPoint>> two_ranks() {
  return {{{100, 0.80, 10.0, 1010.0, 1000}, {200, 0.86, 20.0, 1020.0, 2000}, {300, 0.90, 30.0, 1030.0, 3000}},
          {{100, 0.82, 9.0, 1010.5, 1500}, {200, 0.84, 21.0, 1022.0, 2500}, {300, 0.88, 29.5, 1030.5, 3500}}};
}

void write_text(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// rank<r>/result.json as a peer writes it, optionally with the average it evaluated.
void write_result(const std::filesystem::path& run, int rank, std::vector<int> average_ranks = {},
                  double average_accuracy = 0, std::vector<EvalPoint> evals = {}) {
  murmur::runtime::PeerResult r;
  r.evals = std::move(evals);
  r.rank = rank;
  r.steps = 96;
  r.test_accuracy = 0.5 + 0.01 * rank;
  r.consensus_distance = 0.1 * (rank + 1);
  if (!average_ranks.empty()) {
    r.has_average = true;
    r.average_ranks = std::move(average_ranks);
    r.average_test_accuracy = average_accuracy;
  }
  write_text(run / fmt::format("rank{}", rank) / "result.json", murmur::runtime::peer_json(r).dump());
}

// Eval lines at steps 100 and 200 (accuracy 0.5 then 0.9) on the shared clock, and one cut by a kill.
void write_metrics(const std::filesystem::path& run, int rank) {
  std::string text = fmt::format(R"({{"kind":"step","rank":{0},"step":100,"time_s":9.0,"loss":1.0,"bytes_sent":900}}
{{"kind":"eval","rank":{0},"step":100,"time_s":10.0,"test_accuracy":0.5,"bytes_sent":1000,"unix_s":110.0}}
{{"kind":"eval","rank":{0},"step":200,"time_s":20.0,"test_accuracy":0.9,"bytes_sent":2000,"unix_s":120.0}}
{{"kind":"eval","rank":{0},"step":300,"time_s":30.0,"test_acc)",
                                 rank);
  write_text(run / fmt::format("rank{}", rank) / "metrics.jsonl", text);
}

murmur::ExperimentConfig config_of(int world_size, double target = 0) {
  murmur::ExperimentConfig config;
  config.world.size = world_size;
  config.eval.target_accuracy = target;
  return config;
}

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("summary: time to accuracy waits for the slowest peer", "[summary]") {
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

TEST_CASE("summary: time to accuracy never reached, missing steps, no shared clock, divergence", "[summary]") {
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

  // A diverged rank at step 100 (NaN), first or not, keeps that step from counting.
  for (int diverged : {0, 1}) {
    ranks = two_ranks();
    ranks[diverged][0].accuracy = std::numeric_limits<double>::quiet_NaN();
    CHECK(time_to_accuracy(ranks, 0.5).step == 200);
  }

  const auto j = murmur::runtime::time_to_accuracy_json(time_to_accuracy(two_ranks(), 0.95));
  CHECK(j["target"] == 0.95);
  CHECK(j["time_s"].is_null());
  CHECK(j["bytes_sent"].is_null());
}

TEST_CASE("summary: time_to_accuracy from the metrics files, only with a target", "[summary]") {
  murmur::testing::TempDir dir;
  for (int r = 0; r < 2; ++r) {
    write_result(dir.path(), r);
    write_metrics(dir.path(), r);
  }
  const auto summary = summarize_run(dir.path(), config_of(2, 0.85), 30.0, {});
  REQUIRE(summary.contains("time_to_accuracy"));
  CHECK(summary["time_to_accuracy"]["target"] == 0.85);
  CHECK(summary["time_to_accuracy"]["step"] == 200);
  CHECK(summary["time_to_accuracy"]["bytes_sent"] == 4000);
  CHECK(summary["time_to_accuracy"]["time_s"].get<double>() == Approx(20.0));
  CHECK_FALSE(summarize_run(dir.path(), config_of(2), 30.0, {}).contains("time_to_accuracy"));

  // A target given by the caller (the sweep's) changes time_to_accuracy only, not the config.
  const auto other = summarize_run(dir.path(), config_of(2, 0.85), 30.0, {}, 0.4);
  CHECK(other["time_to_accuracy"]["target"] == 0.4);
  CHECK(other["time_to_accuracy"]["step"] == 100);
  CHECK(other["config"]["eval"]["target_accuracy"] == 0.85);
  CHECK(summarize_run(dir.path(), config_of(2), 30.0, {}, 0.4)["time_to_accuracy"]["step"] == 100);
  CHECK_FALSE(summarize_run(dir.path(), config_of(2, 0.85), 30.0, {}, 0.0).contains("time_to_accuracy"));

  // A rank of the world that never evaluated reaches nothing.
  const auto three = summarize_run(dir.path(), config_of(3, 0.85), 30.0, {});
  CHECK(three["time_to_accuracy"]["step"].is_null());
}

TEST_CASE("summary: a rank without its metrics file here is timed from its result.json's evals", "[summary]") {
  // Rank 1 ran on a node of its own: its result came over the transport, its metrics.jsonl
  // stayed there. Rank 0's metrics file is here and wins over the evals of its result.
  murmur::testing::TempDir dir;
  const auto ranks = two_ranks();
  write_result(dir.path(), 0, {0, 1}, 0.9, {{100, 0.1, 10.0, 1010.0, 1}});
  write_metrics(dir.path(), 0);
  write_result(dir.path(), 1, {}, 0, ranks[1]);
  const auto summary = summarize_run(dir.path(), config_of(2, 0.83), 30.0, {});
  // Rank 0 (metrics): 0.9 at step 200; rank 1 (evals): 0.84 at step 200. From rank 0's evals
  // instead, step 200 would be missing and the target never reached.
  CHECK(summary["time_to_accuracy"]["step"] == 200);
  CHECK(summary["time_to_accuracy"]["bytes_sent"] == 2000 + 2500);
  for (const auto& p : summary["peers"]) CHECK_FALSE(p.contains("evals"));

  // The evals round-trip through result.json; a malformed entry is skipped, not fatal.
  const auto result = murmur::runtime::read_peer_result(dir.path(), 1);
  REQUIRE(result);
  const auto points = murmur::runtime::result_eval_points(*result);
  REQUIRE(points.size() == 3);
  CHECK(points[2].step == 300);
  CHECK(points[2].accuracy == Approx(0.88));
  CHECK(points[2].unix_s == Approx(1030.5));
  CHECK(points[2].bytes_sent == 3500);
  nlohmann::json odd = *result;
  odd["evals"].push_back({{"step", "late"}});
  odd["evals"].push_back(7);
  CHECK(murmur::runtime::result_eval_points(odd).size() == 3);
  odd["evals"] = "none";
  CHECK(murmur::runtime::result_eval_points(odd).empty());
}

TEST_CASE("summary: the average model is the one over the most ranks", "[summary]") {
  // Rank 0 was killed and restarted after the others had finished: it averaged alone, while
  // rank 1 evaluated the survivors' average of ranks 1, 2 and 3.
  murmur::testing::TempDir dir;
  write_result(dir.path(), 0, {0}, 0.80);
  write_result(dir.path(), 1, {1, 2, 3}, 0.84);
  write_result(dir.path(), 2);
  write_result(dir.path(), 3);
  const auto summary = summarize_run(dir.path(), config_of(4), 30.0, {});
  CHECK(summary["average_model"]["test_accuracy"].get<double>() == Approx(0.84));
  CHECK(summary["average_model"]["ranks"] == nlohmann::json::array({1, 2, 3}));
  CHECK(summary["consensus_distance"].get<double>() == Approx(0.2));  // rank 1's
  for (const auto& p : summary["peers"]) CHECK_FALSE(p.contains("average_model"));
  CHECK(summary["world_size"] == 4);
  CHECK(summary["config"]["world"]["size"] == 4);
  CHECK(summary["wall_time_s"] == 30.0);

  murmur::testing::TempDir none;
  write_result(none.path(), 0);
  CHECK_FALSE(summarize_run(none.path(), config_of(1), 1.0, {}).contains("average_model"));
}

TEST_CASE("summary: peers without a valid result.json are failed, with their exit codes", "[summary]") {
  murmur::testing::TempDir dir;
  const auto& run = dir.path();
  write_result(run, 0, {0, 2, 3, 4, 5, 6}, 0.8);
  // rank 1: no result.json (killed)
  write_text(run / "rank2" / "result.json", R"({"rank": 2, "test_accuracy": 0.5, "steps": 9)");  // cut
  write_text(run / "rank3" / "result.json", R"({"rank": 3, "test_accuracy": "high"})");          // wrong type
  write_text(run / "rank4" / "result.json", R"({"rank": 5, "test_accuracy": 0.5})");             // another rank's
  std::filesystem::create_directories(run / "rank5" / "result.json");                            // a directory
  write_text(run / "rank6" / "result.json",
             R"({"rank": 6, "test_accuracy": null, "average_model": {"ranks": "all"}})");        // wrong type
  write_result(run, 7);
  const auto summary = summarize_run(run, config_of(8), 12.5, {{1, -9}, {2, 1}, {3, 137}, {4, 1}, {5, 1}});
  const auto& peers = summary["peers"];
  REQUIRE(peers.size() == 8);
  CHECK(peers[0]["test_accuracy"].get<double>() == Approx(0.5));
  CHECK(peers[7]["steps"] == 96);
  const std::vector<std::pair<int, nlohmann::json>> failed = {{1, -9}, {2, 1}, {3, 137}, {4, 1}, {5, 1}, {6, nullptr}};
  for (const auto& [rank, code] : failed) {
    INFO("rank " << rank);
    CHECK(peers[rank] == nlohmann::json({{"rank", rank}, {"failed", true}, {"exit", code}}));
  }
  CHECK(summary["average_model"]["ranks"].size() == 6);  // rank 0's: rank 6's was not readable
}

TEST_CASE("summary: adpsgd's exchanges, each counted once, and a malformed count fails its peer", "[summary]") {
  murmur::testing::TempDir dir;
  const auto& run = dir.path();
  auto with_exchanges = [&](int rank, bool initiator, std::vector<std::uint64_t> staleness) {
    murmur::runtime::PeerResult r;
    r.rank = rank;
    murmur::optimizers::ExchangeReport e;
    e.initiator = initiator;
    e.exchanges = std::accumulate(staleness.begin(), staleness.end(), std::uint64_t{0});
    e.lost = 1;
    e.staleness = std::move(staleness);
    e.staleness.resize(murmur::optimizers::kStalenessBuckets, 0);
    r.exchanges = murmur::runtime::exchange_json(e);
    write_text(run / fmt::format("rank{}", rank) / "result.json", murmur::runtime::peer_json(r).dump());
  };
  with_exchanges(0, true, {6, 3, 1});  // an active: 10 exchanges, 0, 1 and 2 steps apart
  with_exchanges(1, false, {6, 3, 1});  // its passive counts the same ones
  with_exchanges(2, true, {0, 0, 0, 0, 2});
  write_text(run / "rank3" / "result.json", R"({"rank": 3, "exchanges": {"lost": "one"}})");
  const auto summary = summarize_run(run, config_of(4), 1.0, {});
  CHECK(summary["peers"][1]["exchanges"]["staleness"] == nlohmann::json({6, 3, 1}));  // trailing zeros cut
  CHECK(summary["peers"][3] == nlohmann::json({{"rank", 3}, {"failed", true}, {"exit", nullptr}}));
  const auto& e = summary["exchanges"];
  CHECK(e["made"] == 12);
  CHECK(e["lost"] == 3);
  CHECK(e["staleness"] == nlohmann::json({6, 3, 1, 0, 2}));
  CHECK(e["staleness_p50"] == 0);
  CHECK(e["staleness_p99"] == 4);
  CHECK(e["staleness_max"] == 4);
}

TEST_CASE("summary: murmur-peer --summarize writes summary.json from a run directory", "[summary]") {
  using murmur::testing::run_command;
  murmur::testing::TempDir dir;
  const auto run = dir.path() / "run";
  auto config = config_of(3, 0.85);
  write_text(run / "config.yaml", murmur::to_yaml(config));
  for (int r : {0, 2}) {
    write_result(run, r);
    write_metrics(run, r);
  }
  const std::string peer = murmur::testing::binary("murmur-peer") + " --summarize " + run.string();
  auto r = run_command(peer + " --exit 1=-9 --wall-time 42.5");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.empty());
  auto summary = read_json(run / "summary.json");
  CHECK(summary["world_size"] == 3);
  CHECK(summary["wall_time_s"] == 42.5);
  CHECK(summary["peers"][1] == nlohmann::json({{"rank", 1}, {"failed", true}, {"exit", -9}}));
  CHECK(summary["time_to_accuracy"]["step"].is_null());  // rank 1 never evaluated

  // Again with the sweep's target and no wall time: the recorded wall time and exit codes stay.
  r = run_command(peer + " --target 0.4");
  REQUIRE(r.exit_code == 0);
  summary = read_json(run / "summary.json");
  CHECK(summary["wall_time_s"] == 42.5);
  CHECK(summary["peers"][1]["exit"] == -9);
  CHECK(summary["time_to_accuracy"]["target"] == 0.4);
  CHECK(summary["config"]["eval"]["target_accuracy"] == 0.85);

  // Errors name what is wrong and exit nonzero.
  r = run_command(murmur::testing::binary("murmur-peer") + " --summarize " + (dir.path() / "none").string());
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.output, Catch::Contains("murmur-peer: error:") &&
                           Catch::Contains((dir.path() / "none" / "config.yaml").string()));
  r = run_command(peer + " --exit 3=1");
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.output, Catch::Contains("--exit 3=1") && Catch::Contains("world of 3"));
  r = run_command(peer + " --exit one");
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.output, Catch::Contains("RANK=CODE"));
}
