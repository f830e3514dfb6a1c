// How long a test may wait inside its own code. Sanitizer builds run 2-15x slower, so the bounds
// a test sets itself (deadlines, transport timeouts, a harness killing its ranks) stretch by the
// same factor as ctest's bound on the whole test: MURMUR_TEST_TIMEOUT_SCALE, passed in by
// tests/CMakeLists.txt. Bounds a test expects to be reached (a wait that must fail) stay as
// they are.
#pragma once

#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <vector>

#ifndef MURMUR_TEST_TIME_SCALE
#define MURMUR_TEST_TIME_SCALE 1
#endif

namespace murmur::testing {

inline constexpr int kTimeScale = MURMUR_TEST_TIME_SCALE;

template <class Rep, class Period>
constexpr std::chrono::duration<Rep, Period> scaled(std::chrono::duration<Rep, Period> d) {
  return d * kTimeScale;
}
constexpr int scaled_ms(int ms) { return ms * kTimeScale; }

// TSan checks every byte that a copy or a loop touches: the transport tests' largest messages
// and vectors were most of its stage in CI (a 64 MiB fill, send and compare, per rank and
// backend). Under it, the data-heavy tests take smaller sizes that still cross the same paths
// (messages over a chunk, over the socket's buffer and UCX's rendezvous threshold; several
// pieces per step of an allreduce); the other builds run the full ones.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif

// `full`, or `under_tsan` under TSan.
constexpr std::size_t data_size(std::size_t full, std::size_t under_tsan) {
  return kThreadSanitizer ? under_tsan : full;
}

// All of `sizes`, or under TSan those up to `tsan_max`.
inline std::vector<std::size_t> data_sizes(std::initializer_list<std::size_t> sizes,
                                           std::size_t tsan_max) {
  std::vector<std::size_t> out;
  for (std::size_t n : sizes) {
    if (!kThreadSanitizer || n <= tsan_max) out.push_back(n);
  }
  return out;
}

}  // namespace murmur::testing
