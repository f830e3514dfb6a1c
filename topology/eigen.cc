#include "topology/eigen.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::topology {
namespace {

// Row-major view of an n x n matrix.
struct Dense {
  std::vector<double>& a;
  int n;
  double& operator()(int i, int j) { return a[static_cast<std::size_t>(i) * n + j]; }
};

double sign_of(double magnitude, double sign) {
  return sign >= 0.0 ? std::abs(magnitude) : -std::abs(magnitude);
}

// EISPACK elmhes: Gaussian elimination with pivoting, a similarity transform, so the eigenvalues
// are unchanged. Leaves the Hessenberg matrix with exact zeros below the subdiagonal.
void to_hessenberg(Dense A) {
  const int n = A.n;
  for (int m = 1; m < n - 1; ++m) {
    double x = 0.0;
    int pivot = m;
    for (int j = m; j < n; ++j) {
      if (std::abs(A(j, m - 1)) > std::abs(x)) {
        x = A(j, m - 1);
        pivot = j;
      }
    }
    if (pivot != m) {
      for (int j = m - 1; j < n; ++j) std::swap(A(pivot, j), A(m, j));
      for (int j = 0; j < n; ++j) std::swap(A(j, pivot), A(j, m));
    }
    if (x == 0.0) continue;
    for (int i = m + 1; i < n; ++i) {
      double y = A(i, m - 1);
      if (y == 0.0) continue;
      y /= x;
      A(i, m - 1) = 0.0;
      for (int j = m; j < n; ++j) A(i, j) -= y * A(m, j);
      for (int j = 0; j < n; ++j) A(j, m) += y * A(j, i);
    }
  }
}

}  // namespace

std::vector<double> symmetric_eigenvalues(std::vector<double> a, int n) {
  Dense A{a, n};
  double norm2 = 0.0;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) A(i, j) = A(j, i) = 0.5 * (A(i, j) + A(j, i));
  }
  for (double v : a) norm2 += v * v;
  // An off-diagonal entry below `tiny` moves no eigenvalue by more than n * tiny (Weyl), so
  // such entries are dropped instead of rotated; a sweep that rotates nothing ends the loop.
  const double tiny = 1e-16 * std::sqrt(norm2) / std::max(n, 1);
  for (int sweep = 0; sweep < 100; ++sweep) {
    bool rotated = false;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) {
        const double apq = A(p, q);
        if (std::abs(apq) <= tiny) {
          A(p, q) = A(q, p) = 0.0;
          continue;
        }
        rotated = true;
        // Rotation that zeroes a_pq (Golub & Van Loan, Algorithm 8.5.1), smaller angle chosen.
        const double theta = (A(q, q) - A(p, p)) / (2.0 * apq);
        const double t = std::abs(theta) > 1e150
                             ? 0.5 / theta
                             : sign_of(1.0, theta) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1.0 / std::sqrt(t * t + 1.0);
        const double s = t * c;
        for (int k = 0; k < n; ++k) {
          if (k == p || k == q) continue;
          const double akp = A(k, p), akq = A(k, q);
          A(k, p) = A(p, k) = c * akp - s * akq;
          A(k, q) = A(q, k) = s * akp + c * akq;
        }
        A(p, p) -= t * apq;
        A(q, q) += t * apq;
        A(p, q) = A(q, p) = 0.0;
      }
    }
    if (!rotated) {
      std::vector<double> values(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) values[i] = A(i, i);
      return values;
    }
  }
  throw Error(fmt::format("symmetric_eigenvalues: Jacobi did not converge in 100 sweeps (n = {})",
                          n));
}

std::vector<std::complex<double>> general_eigenvalues(std::vector<double> a, int n) {
  Dense A{a, n};
  to_hessenberg(A);
  std::vector<std::complex<double>> w(static_cast<std::size_t>(n));
  const double eps = std::numeric_limits<double>::epsilon();
  double anorm = 0.0;
  for (int i = 0; i < n; ++i) {
    for (int j = std::max(i - 1, 0); j < n; ++j) anorm += std::abs(A(i, j));
  }
  // Francis double-shift QR on the active block [l, nn], deflating one real eigenvalue or a
  // 2x2 block at a time (NR3 Unsymmeig::hqr, 0-based). t accumulates exceptional shifts.
  int nn = n - 1;
  double t = 0.0;
  while (nn >= 0) {
    int its = 0;
    int l = 0;
    do {
      for (l = nn; l > 0; --l) {  // look for a negligible subdiagonal element
        double s = std::abs(A(l - 1, l - 1)) + std::abs(A(l, l));
        if (s == 0.0) s = anorm;
        if (std::abs(A(l, l - 1)) <= eps * s) {
          A(l, l - 1) = 0.0;
          break;
        }
      }
      double x = A(nn, nn);
      if (l == nn) {  // one root found
        w[nn--] = x + t;
        continue;
      }
      double y = A(nn - 1, nn - 1);
      double ww = A(nn, nn - 1) * A(nn - 1, nn);
      if (l == nn - 1) {  // two roots found
        const double p = 0.5 * (y - x);
        const double q = p * p + ww;
        double z = std::sqrt(std::abs(q));
        x += t;
        if (q >= 0.0) {
          z = p + sign_of(z, p);
          w[nn - 1] = w[nn] = x + z;
          if (z != 0.0) w[nn] = x - ww / z;
        } else {
          w[nn] = {x + p, -z};
          w[nn - 1] = std::conj(w[nn]);
        }
        nn -= 2;
        continue;
      }
      if (its == 60) {
        throw Error(fmt::format("general_eigenvalues: QR did not converge (n = {})", n));
      }
      if (its > 0 && its % 10 == 0) {  // exceptional shift, to break a cycle
        t += x;
        for (int i = 0; i <= nn; ++i) A(i, i) -= x;
        const double s = std::abs(A(nn, nn - 1)) + std::abs(A(nn - 1, nn - 2));
        y = x = 0.75 * s;
        ww = -0.4375 * s * s;
      }
      ++its;
      int m = nn - 2;
      double p = 0, q = 0, r = 0, z = 0;
      for (; m >= l; --m) {  // two consecutive small subdiagonal elements
        z = A(m, m);
        r = x - z;
        double s = y - z;
        p = (r * s - ww) / A(m + 1, m) + A(m, m + 1);
        q = A(m + 1, m + 1) - z - r - s;
        r = A(m + 2, m + 1);
        s = std::abs(p) + std::abs(q) + std::abs(r);
        p /= s;
        q /= s;
        r /= s;
        if (m == l) break;
        const double u = std::abs(A(m, m - 1)) * (std::abs(q) + std::abs(r));
        const double v = std::abs(p) * (std::abs(A(m - 1, m - 1)) + std::abs(z) +
                                        std::abs(A(m + 1, m + 1)));
        if (u <= eps * v) break;
      }
      for (int i = m; i < nn - 1; ++i) {
        A(i + 2, i) = 0.0;
        if (i != m) A(i + 2, i - 1) = 0.0;
      }
      for (int k = m; k < nn; ++k) {  // double QR step on rows l..nn, columns m..nn
        if (k != m) {
          p = A(k, k - 1);
          q = A(k + 1, k - 1);
          r = (k + 1 != nn) ? A(k + 2, k - 1) : 0.0;
          if ((x = std::abs(p) + std::abs(q) + std::abs(r)) != 0.0) {
            p /= x;
            q /= x;
            r /= x;
          }
        }
        const double s = sign_of(std::sqrt(p * p + q * q + r * r), p);
        if (s == 0.0) continue;
        if (k == m) {
          if (l != m) A(k, k - 1) = -A(k, k - 1);
        } else {
          A(k, k - 1) = -s * x;
        }
        p += s;
        x = p / s;
        y = q / s;
        z = r / s;
        q /= p;
        r /= p;
        for (int j = k; j <= nn; ++j) {
          p = A(k, j) + q * A(k + 1, j);
          if (k + 1 != nn) {
            p += r * A(k + 2, j);
            A(k + 2, j) -= p * z;
          }
          A(k + 1, j) -= p * y;
          A(k, j) -= p * x;
        }
        const int mmin = std::min(nn, k + 3);
        for (int i = l; i <= mmin; ++i) {
          p = x * A(i, k) + y * A(i, k + 1);
          if (k + 1 != nn) {
            p += z * A(i, k + 2);
            A(i, k + 2) -= p * r;
          }
          A(i, k + 1) -= p * q;
          A(i, k) -= p;
        }
      }
    } while (l + 1 < nn);
  }
  return w;
}

}  // namespace murmur::topology
