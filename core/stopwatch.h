// Stopwatch: seconds of wall time (steady clock) since construction or the last restart(), for
// the split of a step into compute, communication and waiting. A value; not thread-safe. And
// unix_seconds(): the system clock, the one clock all peers share (a run's time to accuracy).
#pragma once

#include <chrono>

namespace murmur {

class Stopwatch {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void restart() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Seconds since the epoch on the system clock.
inline double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace murmur
