// Dense eigenvalue solvers for the small matrices of spectral analysis (n up to a few hundred;
// both are O(n^3)). Written here rather than taken from LAPACK so that topology/ links nothing
// but core. Pure functions on copies of their input; thread-safe.
#pragma once

#include <complex>
#include <vector>

namespace murmur::topology {

// Eigenvalues of the symmetric n x n row-major matrix `a` (only used as symmetric: the mean of
// a_ij and a_ji is taken), by cyclic Jacobi rotations (Golub & Van Loan, sec. 8.5), in no
// particular order. Accurate to about 1e-14 * ||a||. Throws murmur::Error if 100 sweeps do not
// bring the off-diagonal mass below that.
std::vector<double> symmetric_eigenvalues(std::vector<double> a, int n);

// Eigenvalues of a general real n x n row-major matrix, complex pairs included: reduction to
// upper Hessenberg form by stabilized elementary similarity transforms, then the Francis
// double-shift QR algorithm (EISPACK elmhes/hqr, as in Numerical Recipes 3rd ed., sec. 11.6-11.7).
// Throws murmur::Error if an eigenvalue takes more than 60 QR iterations.
std::vector<std::complex<double>> general_eigenvalues(std::vector<double> a, int n);

}  // namespace murmur::topology
