#include "nn/cpu/blas.h"

#include <cblas.h>

namespace murmur::nn::cpu {

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

void gemv(bool trans_a, std::int64_t m, std::int64_t n, float alpha, const float* a,
          std::int64_t lda, const float* x, float beta, float* y) {
  cblas_sgemv(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), alpha, a, static_cast<blasint>(lda), x, 1, beta, y, 1);
}

}  // namespace murmur::nn::cpu
