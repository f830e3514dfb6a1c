// MURMUR_SKIP: how a Catch2 test that cannot run here (no GPU, no numpy, no murmur-topo) says so.
// Catch2 v2 has no SKIP(), so the test prints one "SKIPPED: <reason>" line to stdout and returns;
// tests/CMakeLists.txt registers every discovered test with SKIP_REGULAR_EXPRESSION "SKIPPED:", so
// ctest counts it as skipped, never as passed. Header only, no state.
#pragma once

#include <iostream>

// Prints "SKIPPED: <reason>" (flushed, so ctest sees it even if the process dies later) and
// returns from the enclosing TEST_CASE. Call it before any check: ctest reports a test whose
// output holds "SKIPPED:" as skipped even where a check failed, so a passing test must never
// print that word with a colon. `reason` is streamed: MURMUR_SKIP("no " << path) works.
#define MURMUR_SKIP(reason)                          \
  do {                                               \
    std::cout << "SKIPPED: " << reason << std::endl; \
    return;                                          \
  } while (0)
