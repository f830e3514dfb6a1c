// Spectral analysis: eigenvalues() (LAPACK) against known spectra, closed forms and numpy.linalg,
// its sort order, the spectral gap of connected graphs, and the rounds-to-10x rule.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numbers>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/rng.h"
#include "tests/skip.h"
#include "tests/topology/python_helper.h"
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

// REQUIREs eigenvalues(w) == expected entry by entry, in order, within 1e-12.
void require_eigenvalues(const MixingMatrix& w, const std::vector<std::complex<double>>& expected) {
  const auto values = eigenvalues(w);
  REQUIRE(values.size() == expected.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    INFO("eigenvalue " << i << ": got " << values[i] << ", want " << expected[i]);
    REQUIRE(std::abs(values[i] - expected[i]) < 1e-12);
  }
}

// The n x n cyclic shift, W_{i, i+1 mod n} = 1: stochastic, periodic, eigenvalues e^{2 pi i k / n}.
MixingMatrix cyclic_shift(int n) {
  MixingMatrix p{n, std::vector<double>(static_cast<std::size_t>(n) * n, 0.0)};
  for (int i = 0; i < n; ++i) p.at(i, (i + 1) % n) = 1.0;
  return p;
}

}  // namespace

TEST_CASE("eigenvalues of known spectra, largest modulus first, ties by real part", "[topology]") {
  using C = std::complex<double>;
  const double r2 = std::sqrt(2.0), r3 = std::sqrt(3.0);
  SECTION("symmetric (dsyevd)") {
    // The second-difference matrix: 2 - 2 cos(k pi / 4), k = 1..3.
    require_eigenvalues({3, {2, -1, 0, -1, 2, -1, 0, -1, 2}}, {2 + r2, 2, 2 - r2});
    // A negative eigenvalue of larger modulus comes first.
    require_eigenvalues({2, {1, 3, 3, 1}}, {4, -2});
    require_eigenvalues({3, {-3, 0, 0, 0, 1, 0, 0, 0, 2}}, {-3, 2, 1});
    // Modulus ties by real part: +2 before -2.
    require_eigenvalues({2, {0, 2, 2, 0}}, {2, -2});
    // The bipartite 4-cycle, (P + P^T) / 2: 1 before -1, though rounding may make |-1| > 1.
    MixingMatrix c4{4, std::vector<double>(16, 0.0)};
    for (int i = 0; i < 4; ++i) c4.at(i, (i + 1) % 4) = c4.at(i, (i + 3) % 4) = 0.5;
    require_eigenvalues(c4, {1, -1, 0, 0});
  }
  SECTION("general (dgeev): complex pairs, positive imaginary part first") {
    require_eigenvalues({2, {1, -2, 2, 1}}, {C(1, 2), C(1, -2)});
    // A rotation-scaling block (|0.5 +- 1.5i| = 1.58) ahead of a real -1.
    require_eigenvalues({3, {0.5, -1.5, 0, 1.5, 0.5, 0, 0, 0, -1}},
                        {C(0.5, 1.5), C(0.5, -1.5), -1});
    // Periodic stochastic matrices: every modulus is 1, so the order is by real part, and the
    // eigenvalue 1 comes first, however rounding orders the moduli.
    require_eigenvalues(cyclic_shift(3), {1, C(-0.5, r3 / 2), C(-0.5, -r3 / 2)});
    require_eigenvalues(cyclic_shift(4), {1, C(0, 1), C(0, -1), -1});
    for (int n : {5, 6, 8, 12, 30}) {
      INFO("cyclic shift n=" << n);
      const auto values = eigenvalues(cyclic_shift(n));
      REQUIRE(std::abs(values[0] - 1.0) < 1e-12);
      for (std::size_t i = 1; i < values.size(); ++i) {
        REQUIRE(std::abs(std::abs(values[i]) - 1.0) < 1e-12);
        REQUIRE(values[i].real() <= values[i - 1].real() + 1e-12);
      }
    }
  }
  SECTION("n = 1") {
    require_eigenvalues({1, {0.25}}, {0.25});
    require_eigenvalues(mixing_at(named("ring"), 1, 0, 0), {1});
  }
  SECTION("a LAPACK failure throws, naming the routine and its info") {
    // LAPACKE rejects a NaN entry as an illegal matrix argument (info = -5).
    const double nan = std::numeric_limits<double>::quiet_NaN();
    REQUIRE_THROWS_MATCHES(eigenvalues({2, {nan, 1, 1, 0}}), Error,
                           Catch::Matchers::Message(
                               "topology: LAPACKE_dsyevd failed on a 2x2 matrix: info = -5"));
    REQUIRE_THROWS_MATCHES(eigenvalues({2, {nan, 1, 2, 0}}), Error,
                           Catch::Matchers::Message(
                               "topology: LAPACKE_dgeev failed on a 2x2 matrix: info = -5"));
  }
}

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

TEST_CASE("eigenvalues agree with numpy.linalg", "[topology][numpy]") {
  if (!testing::have_numpy()) MURMUR_SKIP("no numpy");
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
