// Dense eigenvalues of the small matrices of spectral analysis, by LAPACK through its C
// interface (LAPACKE, backed by OpenBLAS): dsyevd for symmetric matrices, dgeev for the rest.
// Pure functions on copies of their input; thread-safe (OpenBLAS's LAPACK may be called from
// several threads at once).
#pragma once

#include <complex>
#include <vector>

namespace murmur::topology {

// Eigenvalues of the symmetric n x n row-major matrix `a`, in ascending order, by LAPACKE_dsyevd.
// `a` is only used as symmetric: the mean of a_ij and a_ji is taken, so rounding noise between
// the two triangles is split evenly rather than one triangle being ignored. Throws murmur::Error
// naming the routine and its info if LAPACK fails.
std::vector<double> symmetric_eigenvalues(std::vector<double> a, int n);

// Eigenvalues of a general real n x n row-major matrix, complex conjugate pairs included (the
// one with positive imaginary part first), in no particular order, by LAPACKE_dgeev (balancing,
// Hessenberg reduction, Francis double-shift QR; no eigenvectors). Throws murmur::Error naming the
// routine and its info if LAPACK fails (info > 0: the QR iteration did not converge).
std::vector<std::complex<double>> general_eigenvalues(std::vector<double> a, int n);

}  // namespace murmur::topology
