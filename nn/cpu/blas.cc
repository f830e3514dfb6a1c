#include "nn/cpu/blas.h"

#include <cblas.h>

#include <semaphore>

namespace murmur::nn::cpu {
namespace {

// OpenBLAS keeps a fixed table of work buffers, one per call in flight (2 x its NUM_THREADS,
// 128 in Debian's build), and aborts ("too many memory regions") when more calls are inside it
// at once. One peer has one calling thread; murmur-sim's 1024 peer threads, preempted mid-call
// on 2 cores, got past the table in CI and crashed. A call waits here for one of 32 places.
std::counting_semaphore<> places(32);

struct InBlas {
  InBlas() { places.acquire(); }
  ~InBlas() { places.release(); }
  InBlas(const InBlas&) = delete;
  InBlas& operator=(const InBlas&) = delete;
};

}  // namespace

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  InBlas in_blas;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

void gemv(bool trans_a, std::int64_t m, std::int64_t n, float alpha, const float* a,
          std::int64_t lda, const float* x, float beta, float* y) {
  InBlas in_blas;
  cblas_sgemv(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), alpha, a, static_cast<blasint>(lda), x, 1, beta, y, 1);
}

}  // namespace murmur::nn::cpu
