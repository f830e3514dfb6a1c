// The registry of averaging algorithms (optimizers/algorithm.h): unique names, one tag purpose
// each within the layout's range, an unknown name answered with the known ones, and every entry
// builds and averages on a graph it accepts (4 inproc ranks), on the host and off it.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "optimizers/algorithm.h"
#include "tests/optimizers/consensus_util.h"
#include "tests/skip.h"
#include "tests/transport/backends.h"
#include "transport/tag.h"

namespace murmur::optimizers::testing {
namespace {

namespace tt = transport::testing;

TEST_CASE("the registry names each algorithm once and gives each a purpose", "[algorithms]") {
  std::set<std::string_view> names;
  std::set<unsigned> purposes;
  for (const AlgorithmInfo* a : algorithms()) {
    CAPTURE(a->name);
    CHECK(names.insert(a->name).second);
    const unsigned p = purpose_of(*a);
    CHECK(purposes.insert(p).second);
    CHECK(p >= transport::purpose::kFirstAlgorithm);
    CHECK(p < transport::purpose::kCount);
    CHECK(a->make != nullptr);
    CHECK_FALSE(a->summary.empty());
    CHECK(&find_algorithm(a->name) == a);
  }
  CHECK(names.size() >= 8);
  CHECK_THROWS_WITH(find_algorithm("gossip"), Catch::Contains("unknown algorithm 'gossip'") &&
                                                  Catch::Contains("dpsgd") &&
                                                  Catch::Contains("choco"));
}

// A graph each kind of algorithm can run on with 4 ranks.
TopologyConfig graph_for(const AlgorithmInfo& a) {
  if (a.needs == GraphNeeds::kColumnStochastic) return graph("exponential");
  return graph("ring");
}

TEST_CASE("every registered algorithm averages toward the mean, on and off the host",
          "[algorithms]") {
  const bool offhost = GENERATE(false, true);
  for (const AlgorithmInfo* a : algorithms()) {
    if (offhost && !a->device) continue;  // host memory only (adpsgd)
    CAPTURE(a->name, offhost);
    AlgorithmConfig alg = algorithm(std::string(a->name));
    // DiLoCo's outer step as a plain average (the ranks start apart here, which DiLoCo does not
    // assume): theta <- theta - 1 x (theta - mean).
    alg.outer_lr = 1.0;
    alg.outer_momentum = 0.0;
    const TopologyConfig topo = graph_for(*a);
    auto results = tt::run_ranks("inproc", 4, [&](tt::RankContext& ctx) {
      std::vector<float> params(300, static_cast<float>(ctx.rank()));
      TransportConfig tc;
      tc.recv_timeout_ms = 20000;
      tc.chunk_bytes = 256;  // several staged pieces per message off the host
      auto device = device::make_offhost_cpu();
      auto built = build_averaging(ctx.transport(), offhost ? *device : device::cpu(), alg, topo,
                                   tc, params, 3);
      for (int t = 1; t <= 40; ++t) {
        // An asynchronous algorithm averages while a step computes: steps take a while here.
        if (a->asynchronous) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        built.averaging->after_step(t);
      }
      built.averaging->finish();
      std::vector<float> z(params.size());
      const std::span<const float> model =
          built.averaging->debiased(z) ? std::span<const float>(z) : std::span<const float>(params);
      // The mean of the ranks' values is 1.5; "none" keeps its own.
      const float want = a->name == "none" ? static_cast<float>(ctx.rank()) : 1.5f;
      MURMUR_CHECK(std::abs(model[0] - want) < 0.05f && std::abs(model[299] - want) < 0.05f);
    });
    INFO(tt::failures(results));
    CHECK(tt::failures(results).empty());
  }
}

// Other tools (the sweep's plots) read the registry from murmur-topo --list --json.
TEST_CASE("murmur-topo --list --json carries the algorithm registry", "[algorithms]") {
  const std::string binary = std::string(MURMUR_BINARY_DIR) + "/bin/murmur-topo";
  if (!std::filesystem::exists(binary)) MURMUR_SKIP("no murmur-topo (build target murmur-topo)");
  FILE* pipe = popen((binary + " --list --json").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  REQUIRE(pclose(pipe) == 0);
  const auto j = nlohmann::json::parse(out)["algorithms"];
  REQUIRE(j.size() == algorithms().size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    const AlgorithmInfo& a = *algorithms()[i];
    INFO(a.name);
    CHECK(j[i]["name"] == a.name);
    CHECK(j[i]["uses_graph"] == (a.needs != GraphNeeds::kNone));
    CHECK(j[i]["compresses"] == a.compresses);
    CHECK(j[i]["overlaps"] == a.overlaps);
    CHECK(j[i]["keys"].size() == a.keys.size());
  }
}

}  // namespace
}  // namespace murmur::optimizers::testing
