#include "topology/lapack_eigen.h"

#include <cstddef>

#include <fmt/format.h>
#include <lapacke.h>

#include "core/error.h"

namespace murmur::topology {
namespace {

void check(lapack_int info, const char* routine, int n) {
  if (info == 0) return;
  // info < 0: argument -info was illegal (LAPACK_WORK_MEMORY_ERROR: no memory for the
  // workspace); info > 0: the algorithm did not converge.
  throw Error(fmt::format("topology: {} failed on a {}x{} matrix: info = {}", routine, n, n,
                          static_cast<long>(info)));
}

}  // namespace

std::vector<double> symmetric_eigenvalues(std::vector<double> a, int n) {
  if (n <= 0) return {};
  const auto at = [&](int i, int j) -> double& { return a[static_cast<std::size_t>(i) * n + j]; };
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) at(i, j) = at(j, i) = 0.5 * (at(i, j) + at(j, i));
  }
  std::vector<double> values(static_cast<std::size_t>(n));
  check(LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'N', 'U', n, a.data(), n, values.data()),
        "LAPACKE_dsyevd", n);
  return values;
}

std::vector<std::complex<double>> general_eigenvalues(std::vector<double> a, int n) {
  if (n <= 0) return {};
  std::vector<double> re(static_cast<std::size_t>(n)), im(static_cast<std::size_t>(n));
  // jobvl = jobvr = 'N': eigenvalues only, so the (unused) vector arguments take ldv = 1.
  check(LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'N', n, a.data(), n, re.data(), im.data(), nullptr,
                      1, nullptr, 1),
        "LAPACKE_dgeev", n);
  std::vector<std::complex<double>> values;
  values.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) values.emplace_back(re[i], im[i]);
  return values;
}

}  // namespace murmur::topology
