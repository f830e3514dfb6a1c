#include "topology/spectral.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "topology/lapack_eigen.h"
#include "topology/schedule.h"

namespace murmur::topology {
namespace {

bool is_symmetric(const MixingMatrix& w) {
  for (int i = 0; i < w.n; ++i) {
    for (int j = i + 1; j < w.n; ++j) {
      if (std::abs(w(i, j) - w(j, i)) > 1e-12) return false;
    }
  }
  return true;
}

// The SLEM is treated as 1 within this much: rounding keeps a true 1 from being exactly 1.
constexpr double kUnitTolerance = 1e-10;

// Moduli within this much of each other (relative to the largest) count as tied. LAPACK returns
// the unit moduli of a periodic matrix (a permutation, a bipartite W) a few ulps apart, in either
// direction, so an exact comparison could put -1 or e^{2 pi i / n} ahead of the eigenvalue 1.
constexpr double kTieTolerance = 1e-10;

}  // namespace

std::vector<std::complex<double>> eigenvalues(const MixingMatrix& w) {
  std::vector<std::complex<double>> values;
  if (is_symmetric(w)) {
    for (double v : symmetric_eigenvalues(w.w, w.n)) values.emplace_back(v, 0.0);
  } else {
    values = general_eigenvalues(w.w, w.n);
  }
  // A total order first (modulus, real part, imaginary part, each largest first), so the result
  // does not depend on the order LAPACK returns ...
  std::sort(values.begin(), values.end(), [](auto a, auto b) {
    const double ma = std::abs(a), mb = std::abs(b);
    if (ma != mb) return ma > mb;
    if (a.real() != b.real()) return a.real() > b.real();
    return a.imag() > b.imag();
  });
  // ... then each run of moduli tied with the run's first goes by real part, largest first.
  const double tol = values.empty() ? 0.0 : kTieTolerance * std::abs(values.front());
  for (auto first = values.begin(); first != values.end();) {
    const double lead = std::abs(*first);
    auto last = first + 1;
    while (last != values.end() && lead - std::abs(*last) <= tol) ++last;
    std::stable_sort(first, last, [](auto a, auto b) { return a.real() > b.real(); });
    first = last;
  }
  return values;
}

Spectrum spectrum_from_slem(double slem, int rounds, int n) {
  Spectrum s;
  s.rounds = rounds;
  if (n <= 1) {
    s.second_eigenvalue = 0.0;
    s.spectral_gap = 1.0;
    s.per_round = 0.0;
    s.rounds_to_10x = 0.0;
    return s;
  }
  s.second_eigenvalue = slem;
  s.spectral_gap = 1.0 - slem;
  s.per_round = std::pow(std::max(slem, 0.0), 1.0 / rounds);
  if (slem >= 1.0 - kUnitTolerance) {
    s.rounds_to_10x = std::numeric_limits<double>::infinity();
  } else if (slem <= 1e-300) {
    s.rounds_to_10x = rounds;  // exact consensus after one window
  } else {
    const double windows = std::ceil(std::log(10.0) / -std::log(slem));
    s.rounds_to_10x = rounds * std::max(1.0, windows);
  }
  return s;
}

Spectrum analyze(const MixingMatrix& w) {
  const auto values = eigenvalues(w);
  return spectrum_from_slem(values.size() > 1 ? std::abs(values[1]) : 0.0, 1, w.n);
}

MixingMatrix product(const TopologyConfig& c, int n, std::uint64_t seed, std::int64_t first,
                     int rounds) {
  if (rounds < 1) throw ConfigError(fmt::format("topology: product over {} rounds", rounds));
  MixingMatrix p = mixing_at(c, n, seed, first);
  for (int r = 1; r < rounds; ++r) {
    const MixingMatrix w = mixing_at(c, n, seed, first + r);
    MixingMatrix next{n, std::vector<double>(p.w.size(), 0.0)};
    for (int i = 0; i < n; ++i) {  // next = W * p, skipping W's zeros (W is sparse)
      for (int j = 0; j < n; ++j) {
        const double wij = w(i, j);
        if (wij == 0.0) continue;
        for (int k = 0; k < n; ++k) next.at(i, k) += wij * p(j, k);
      }
    }
    p = std::move(next);
  }
  return p;
}

Spectrum analyze_schedule(const TopologyConfig& c, int n, std::uint64_t seed, std::int64_t first,
                          int rounds) {
  if (rounds == 0) rounds = analysis_window(c, n);
  const MixingMatrix p = product(c, n, seed, first, rounds);
  const auto values = eigenvalues(p);
  return spectrum_from_slem(values.size() > 1 ? std::abs(values[1]) : 0.0, rounds, n);
}

}  // namespace murmur::topology
