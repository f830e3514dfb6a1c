// Thin row-major wrappers over OpenBLAS (cblas.h stays out of every other header), the only
// way into it: they bound how many threads are inside it at once (blas.cc). All matrices are
// row-major with explicit leading dimensions; C = alpha op(A) op(B) + beta C.
#pragma once

#include <cstdint>

namespace murmur::nn::cpu {

// op(A) is m x k, op(B) is k x n, C is m x n.
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc);
// y = alpha op(A) x + beta y, A is m x n row-major.
void gemv(bool trans_a, std::int64_t m, std::int64_t n, float alpha, const float* a,
          std::int64_t lda, const float* x, float beta, float* y);

}  // namespace murmur::nn::cpu
