// How long a test may wait inside its own code. Sanitizer builds run 2-15x slower, so the bounds
// a test sets itself (deadlines, transport timeouts, a harness killing its ranks) stretch by the
// same factor as ctest's bound on the whole test: MURMUR_TEST_TIMEOUT_SCALE, passed in by
// tests/CMakeLists.txt. Bounds a test expects to be reached (a wait that must fail) stay as
// they are.
#pragma once

#include <chrono>

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

}  // namespace murmur::testing
