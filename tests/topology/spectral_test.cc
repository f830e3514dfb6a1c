// Spectral analysis: the eigen-solvers against closed forms and against numpy.linalg, the
// spectral gap of connected graphs, and the rounds-to-10x rule.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/rng.h"
#include "tests/topology/python_helper.h"
#include "topology/eigen.h"
#include "topology/mixing.h"
#include "topology/schedule.h"
#include "topology/spectral.h"

using namespace murmur;
using namespace murmur::topology;

namespace {

TopologyConfig named(const std::string& graph, const std::string& weights = "uniform") {
  TopologyConfig c;
  c.graph = graph;
  c.weights = weights;
  return c;
}

double slem_of(const std::string& graph, int n, const std::string& weights = "uniform") {
  return analyze(mixing_at(named(graph, weights), n, 0, 0)).second_eigenvalue;
}

}  // namespace

TEST_CASE("second eigenvalues match closed forms", "[topology]") {
  using std::numbers::pi;
  for (int n : {5, 8, 13}) {
    double ring_slem = 0;  // uniform ring: (1 + 2 cos(2 pi k / n)) / 3, k != 0
    for (int k = 1; k < n; ++k) {
      ring_slem = std::max(ring_slem, std::abs((1 + 2 * std::cos(2 * pi * k / n)) / 3));
    }
    REQUIRE(slem_of("ring", n) == Approx(ring_slem).margin(1e-12));
    // (I + P) / 2 is not symmetric: the QR path. |(1 + e^{2 pi i k/n}) / 2| = |cos(pi k / n)|.
    REQUIRE(slem_of("ring_directed", n) == Approx(std::cos(pi / n)).margin(1e-10));
  }
  for (int d : {1, 2, 3, 5}) {  // hypercube: (d + 1 - 2s) / (d + 1), s = 1..d
    REQUIRE(slem_of("hypercube", 1 << d) == Approx((d - 1.0) / (d + 1.0)).margin(1e-12));
  }
  const Spectrum complete = analyze(mixing_at(named("complete"), 7, 0, 0));
  REQUIRE(complete.second_eigenvalue == Approx(0).margin(1e-12));
  REQUIRE(complete.rounds_to_10x == 1);
}

TEST_CASE("connected graphs have a positive spectral gap, disconnected ones none", "[topology]") {
  struct Case {
    const char* graph;
    const char* weights;
    int n;
  };
  const Case cases[] = {{"ring", "uniform", 16},        {"ring", "metropolis", 9},
                        {"ring_directed", "uniform", 6}, {"torus", "uniform", 16},
                        {"complete", "uniform", 5},     {"hypercube", "metropolis", 32},
                        {"exponential", "uniform", 12}};
  for (const Case& c : cases) {
    INFO(c.graph << " n=" << c.n);
    const Spectrum s = analyze(mixing_at(named(c.graph, c.weights), c.n, 0, 0));
    REQUIRE(s.spectral_gap > 1e-6);
    REQUIRE(s.spectral_gap == Approx(1 - s.second_eigenvalue));
    REQUIRE(std::isfinite(s.rounds_to_10x));
    REQUIRE(s.rounds_to_10x == std::max(1.0, std::ceil(std::log(10) / -std::log(s.second_eigenvalue))));
  }
  TopologyConfig two_islands = named("custom");
  two_islands.edges = {{0, 1}, {1, 2}, {3, 4}, {4, 5}};
  const Spectrum s = analyze(mixing_at(two_islands, 6, 0, 0));
  REQUIRE(s.spectral_gap == Approx(0).margin(1e-10));
  REQUIRE(std::isinf(s.rounds_to_10x));
  // Random gossip over its window mixes too, though no single round is connected.
  TopologyConfig kout = named("random_kout");
  for (const TopologyConfig& c : {named("random_matching"), kout}) {
    const Spectrum w = analyze_schedule(c, 16, 1);
    REQUIRE(w.rounds == 16);
    REQUIRE(w.spectral_gap > 0.01);
    REQUIRE(w.per_round == Approx(std::pow(w.second_eigenvalue, 1.0 / 16)));
  }
  REQUIRE(analyze(mixing_at(named("ring"), 1, 0, 0)).rounds_to_10x == 0);
}

TEST_CASE("eigen-solvers agree with numpy.linalg", "[topology][numpy]") {
  if (!testing::have_numpy()) {
    WARN("no numpy for /usr/bin/python3: numpy cross-check skipped");
    return;
  }
  // Random dense matrices (symmetric and not), a push-sum product, and stochastic matrices.
  Rng rng(2024);
  std::vector<MixingMatrix> cases;
  for (int n : {1, 2, 3, 17, 40}) {
    MixingMatrix general{n, std::vector<double>(n * n)};
    for (double& v : general.w) v = rng.normal();
    MixingMatrix sym = general;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) sym.at(i, j) = general(i, j) + general(j, i);
    }
    cases.push_back(general);
    cases.push_back(sym);
  }
  TopologyConfig kout = named("random_kout");
  kout.k = 2;
  cases.push_back(product(kout, 24, 9, 0, 5));
  cases.push_back(mixing_at(named("exponential"), 20, 0, 0));
  cases.push_back(mixing_at(named("torus", "metropolis"), 30, 0, 0));
  cases.push_back(product(named("one_peer_exponential"), 12, 0, 0, 4));

  nlohmann::json in = nlohmann::json::array();
  for (const auto& m : cases) in.push_back({{"n", m.n}, {"w", m.w}});
  testing::ScratchDir dir("eigen");
  testing::write_file(dir.path() / "in.json", in.dump());
  const std::string script = R"(
import json, sys
import numpy as np
out = []
for m in json.load(open(sys.argv[1])):
    n = m["n"]
    ev = np.linalg.eigvals(np.array(m["w"], dtype=float).reshape(n, n))
    out.append({"abs": sorted(np.abs(ev).tolist(), reverse=True),
                "re": sorted(ev.real.tolist()), "im": sorted(np.abs(ev.imag).tolist())})
print(json.dumps(out))
)";
  const auto output = testing::run_python(script, testing::quoted(dir.path() / "in.json"),
                                          dir.path());
  REQUIRE(output.has_value());
  const auto expected = nlohmann::json::parse(*output);
  REQUIRE(expected.size() == cases.size());
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const auto values = eigenvalues(cases[c]);
    const int n = cases[c].n;
    double scale = 1.0;
    for (double v : cases[c].w) scale = std::max(scale, std::abs(v));
    const double tol = 1e-9 * scale * n;
    std::vector<double> re, im;
    for (const auto& v : values) {
      re.push_back(v.real());
      im.push_back(std::abs(v.imag()));
    }
    std::sort(re.begin(), re.end());
    std::sort(im.begin(), im.end());
    INFO("case " << c << " n=" << n);
    REQUIRE(static_cast<int>(values.size()) == n);
    for (int i = 0; i < n; ++i) {
      REQUIRE(std::abs(values[i]) == Approx(expected[c]["abs"][i].get<double>()).margin(tol));
      REQUIRE(re[i] == Approx(expected[c]["re"][i].get<double>()).margin(tol));
      REQUIRE(im[i] == Approx(expected[c]["im"][i].get<double>()).margin(tol));
    }
  }
}
