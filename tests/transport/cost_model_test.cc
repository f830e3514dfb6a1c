// The alpha-beta cost model's arithmetic: the weighted least squares recovers alpha and beta
// from exact samples, keeps them >= 0, splits samples into message-size bands that cover every
// size; the JSON round-trips, and a file that is not a cost model is refused naming the field.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

#include "core/error.h"
#include "tests/runtime/test_util.h"
#include "transport/cost_model.h"

namespace murmur::transport {
namespace {

using Catch::Matchers::Contains;

// t = phases (alpha + beta bytes) exactly.
CostSample exact(double phases, double message, double bytes, double alpha, double beta) {
  return {phases, message, bytes, phases * (alpha + beta * bytes)};
}

TEST_CASE("the fit recovers alpha and beta from exact samples", "[transport][cost]") {
  const double alpha = 40e-6, beta = 0.7e-9;
  // A ring exchange (one phase of two messages) and a 4-rank ring allreduce (6 phases).
  const std::vector<CostSample> samples{exact(1, 1 << 20, 2 << 20, alpha, beta),
                                        exact(1, 4 << 20, 8 << 20, alpha, beta),
                                        exact(6, 1 << 20, 1 << 20, alpha, beta),
                                        exact(6, 4 << 20, 4 << 20, alpha, beta)};
  const CostBand b = fit_band(samples);
  CHECK(b.alpha_s == Approx(alpha).epsilon(1e-9));
  CHECK(b.beta_s_per_byte == Approx(beta).epsilon(1e-9));
  CHECK(b.samples == 4);
  CHECK(b.max_relative_error < 1e-9);
}

TEST_CASE("the fit weighs relative errors and keeps alpha and beta >= 0", "[transport][cost]") {
  // Hand-checked: two samples 1 phase of 1000 bytes in 1 s and of 2000 bytes in 1 s give
  // beta = 0 and alpha = 1 (a negative beta is clamped, alpha refitted alone).
  CostBand flat = fit_band({{1, 1000, 1000, 1.0}, {1, 2000, 2000, 1.0}});
  CHECK(flat.beta_s_per_byte == 0);
  CHECK(flat.alpha_s == Approx(1.0));
  // Time falling with size would need a negative alpha: 1000 B in 1 s, 3000 B in 4 s.
  CostBand steep = fit_band({{1, 1000, 1000, 1.0}, {1, 3000, 3000, 4.0}});
  CHECK(steep.alpha_s == 0);
  // beta alone, weighted by 1/t^2: sum(x t / t^2) / sum(x^2 / t^2) = (1 + 0.75) / (1 + 0.5625).
  CHECK(steep.beta_s_per_byte == Approx((1000.0 / 1 + 3000.0 / 4) / (1e6 / 1 + 9e6 / 16)));
  // One message size only: alpha and beta cannot be told apart; the bandwidth takes it all.
  CostBand one = fit_band({{1, 4096, 4096, 2e-6}});
  CHECK(one.alpha_s == 0);
  CHECK(one.beta_s_per_byte == Approx(2e-6 / 4096));
  CHECK_THROWS_AS(fit_band({}), Error);
  CHECK_THROWS_AS(fit_band({{1, 10, 10, 0.0}}), Error);
}

TEST_CASE("bands split the samples by message size and cover every size", "[transport][cost]") {
  std::vector<CostSample> samples;
  for (double m : {4096.0, 16384.0}) samples.push_back(exact(1, m, m, 10e-6, 2e-9));
  for (double m : {1 << 20, 4 << 20}) samples.push_back(exact(1, m, m, 100e-6, 1e-9));
  const LinkCost link = fit_link(samples, default_band_edges());
  REQUIRE(link.bands.size() == 2);  // nothing between 64 KiB and 1 MiB: no band there
  CHECK(link.bands[0].min_bytes == 0);
  CHECK(link.bands[0].max_bytes == 64 * 1024);
  CHECK(link.bands[1].min_bytes == 64 * 1024);  // stretched down over the empty band
  CHECK(link.bands[1].max_bytes == 0);
  CHECK(link.bands[0].alpha_s == Approx(10e-6));
  CHECK(link.bands[1].beta_s_per_byte == Approx(1e-9));
  CHECK(link.phase_seconds(8192, 3 * 8192) == Approx(10e-6 + 2e-9 * 3 * 8192));
  CHECK(link.phase_seconds(64 << 20, 64 << 20) == Approx(100e-6 + 1e-9 * (64 << 20)));
}

TEST_CASE("a cost model round-trips through JSON and picks the nearest rank count below",
          "[transport][cost]") {
  CostModel model;
  model.machine = "test";
  std::vector<CostSample> samples{exact(1, 4096, 4096, 5e-6, 1e-9), exact(6, 1 << 20, 1 << 20, 50e-6, 1e-9),
                                  exact(1, 4 << 20, 8 << 20, 50e-6, 1e-9)};
  model.links["tcp"][2] = fit_link(samples, default_band_edges());
  model.links["tcp"][4] = fit_link(samples, {});
  murmur::testing::TempDir dir;
  const auto file = dir.path() / "sub" / "cost_model.json";
  write_cost_model(file, model);
  const CostModel back = read_cost_model(file);
  CHECK(back.machine == "test");
  REQUIRE(back.links.at("tcp").size() == 2);
  CHECK(back.links.at("tcp").at(2).bands.size() == model.links["tcp"][2].bands.size());
  CHECK(back.links.at("tcp").at(4).bands.at(0).beta_s_per_byte ==
        model.links["tcp"][4].bands[0].beta_s_per_byte);
  int fitted = 0;
  back.link("tcp", 3, &fitted);
  CHECK(fitted == 2);
  back.link("tcp", 9, &fitted);
  CHECK(fitted == 4);
  back.link("tcp", 1, &fitted);
  CHECK(fitted == 2);  // none below: the smallest above
  CHECK_THROWS_WITH(back.link("ucx", 4), Contains("no fit for backend 'ucx'") && Contains("tcp"));
}

TEST_CASE("a file that is not a cost model is refused naming the field", "[transport][cost]") {
  CostModel model;
  model.links["tcp"][4] = fit_link({exact(1, 4096, 4096, 5e-6, 1e-9), exact(6, 2 << 20, 1 << 20, 5e-5, 1e-9)},
                                   default_band_edges());
  const nlohmann::json good = to_json(model);
  CHECK_NOTHROW(cost_model_from_json(good, "f.json"));
  const auto refused = [&](auto&& mutate, const std::string& words) {
    nlohmann::json j = good;
    mutate(j);
    CHECK_THROWS_WITH(cost_model_from_json(j, "f.json"), Contains("f.json") && Contains(words));
  };
  refused([](nlohmann::json& j) { j = nlohmann::json::array(); }, "not a JSON object");
  refused([](nlohmann::json& j) { j["murmur_cost_model"] = 2; }, "murmur_cost_model");
  refused([](nlohmann::json& j) { j["links"] = 3; }, "links");
  refused([](nlohmann::json& j) { j["links"]["tcp"]["x"] = j["links"]["tcp"]["4"]; }, "links.tcp.x");
  refused([](nlohmann::json& j) { j["links"]["tcp"]["4"]["bands"][0]["alpha_s"] = -1; },
          "links.tcp.4.bands[0].alpha_s");
  refused([](nlohmann::json& j) { j["links"]["tcp"]["4"]["bands"][1]["beta_s_per_byte"] = "fast"; },
          "bands[1].beta_s_per_byte");
  refused([](nlohmann::json& j) { j["links"]["tcp"]["4"]["bands"][1]["min_bytes"] = 5; }, "in order");
  refused([](nlohmann::json& j) { j["links"]["tcp"]["4"]["bands"][1]["max_bytes"] = 1e9; }, "open above");
  refused([](nlohmann::json& j) { j["links"]["tcp"]["4"]["bands"] = nlohmann::json::array(); }, "non-empty");
  murmur::testing::TempDir dir;
  std::ofstream(dir.path() / "bad.json") << "{not json";
  CHECK_THROWS_WITH(read_cost_model(dir.path() / "bad.json"), Contains("bad.json") && Contains("not JSON"));
}

TEST_CASE("the default file is $MURMUR_COST_MODEL, else the cache directory", "[transport][cost]") {
  const char* saved = std::getenv("MURMUR_COST_MODEL");
  const std::string keep = saved ? saved : "";
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const std::string keep_cache = cache ? cache : "";
  ::setenv("MURMUR_COST_MODEL", "/x/y.json", 1);
  CHECK(default_cost_model_path() == "/x/y.json");
  ::unsetenv("MURMUR_COST_MODEL");
  ::setenv("XDG_CACHE_HOME", "/cache", 1);
  CHECK(default_cost_model_path() == "/cache/murmur/cost_model.json");
  ::unsetenv("XDG_CACHE_HOME");
  if (!keep_cache.empty()) ::setenv("XDG_CACHE_HOME", keep_cache.c_str(), 1);
  if (!keep.empty()) ::setenv("MURMUR_COST_MODEL", keep.c_str(), 1);
}

}  // namespace
}  // namespace murmur::transport
