// Spectral analysis of mixing: how fast repeated averaging x <- W x drives every rank to the
// consensus value. The rate is the second-largest eigenvalue modulus (SLEM) of W; for a
// time-varying schedule, of the product of its matrices over a window of rounds. Pure
// functions; thread-safe.
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

#include "core/config.h"
#include "topology/mixing.h"

namespace murmur::topology {

struct Spectrum {
  int rounds = 1;                 // rounds the analyzed matrix spans (1: a single W)
  double second_eigenvalue = 0;   // SLEM of the analyzed matrix (0 when n = 1)
  double spectral_gap = 1;        // 1 - second_eigenvalue
  double per_round = 0;           // second_eigenvalue^(1 / rounds): the rate of one round
  // Rounds until the consensus error shrinks 10x, asymptotically: rounds * ceil(ln 10 /
  // -ln second_eigenvalue), at least `rounds` (whole windows); +infinity when
  // second_eigenvalue >= 1 (a disconnected graph, or a periodic one such as a bipartite W
  // with zero diagonal); 0 when n = 1.
  double rounds_to_10x = 1;
};

// All eigenvalues of w, sorted by modulus, largest first. Moduli within 1e-10 (relative to the
// largest) of the first of a run are ties, broken by real part, largest first, then by imaginary
// part (a conjugate pair: positive imaginary part first). So a stochastic matrix has eigenvalue 1
// first, even a periodic one whose -1 or e^{2 pi i k / n} rounding makes look larger. Symmetric w
// (|W_ij - W_ji| <= 1e-12) goes to LAPACK's dsyevd, anything else to dgeev (lapack_eigen.h).
// Throws murmur::Error, naming the routine and its info, if LAPACK fails.
std::vector<std::complex<double>> eigenvalues(const MixingMatrix& w);

// The spectrum of one matrix (rounds = 1). The SLEM is the modulus of the second entry of
// eigenvalues(w), so a repeated eigenvalue 1 (a disconnected graph) gives a gap of 0.
Spectrum analyze(const MixingMatrix& w);

// P = W(first + rounds - 1) * ... * W(first + 1) * W(first): the map from the values before
// round `first` to those after `rounds` rounds of the schedule.
MixingMatrix product(const TopologyConfig& config, int n, std::uint64_t seed,
                     std::int64_t first, int rounds);

// analyze(product(...)) with Spectrum::rounds = rounds. rounds = 0 means analysis_window (a
// period for one_peer_exponential; a sampled window, seed-dependent, for random gossip). For a
// static graph with rounds = 0, this is analyze(W).
Spectrum analyze_schedule(const TopologyConfig& config, int n, std::uint64_t seed,
                          std::int64_t first = 0, int rounds = 0);

// Applies the rounds scaling of Spectrum to a SLEM measured over `rounds` rounds.
Spectrum spectrum_from_slem(double slem, int rounds, int n);

}  // namespace murmur::topology
