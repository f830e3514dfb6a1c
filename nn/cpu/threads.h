// The CPU compute threads of this process: how many threads OpenBLAS (and murmur's own
// parallel loops) use. Process-wide; call from the main thread before training, not concurrently.
#pragma once

#include <cstdint>
#include <functional>

namespace murmur::nn::cpu {

// Sets the compute threads (n >= 1; 0 = all hardware threads) for OpenBLAS and parallel_for.
void set_compute_threads(int n);
// The current setting (>= 1).
int compute_threads();

// Runs fn(begin, end) over [0, n) split into at most compute_threads() contiguous chunks of at
// least `grain` items, on a persistent pool; returns when all chunks are done. fn must not throw
// and must not call parallel_for itself. With one thread, or n <= grain, it runs inline.
// Safe to call from several threads (their loops take turns on the pool).
void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn);

}  // namespace murmur::nn::cpu
