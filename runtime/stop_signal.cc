#include "runtime/stop_signal.h"

#include <atomic>
#include <csignal>
#include <thread>

namespace murmur::runtime {
namespace {

std::atomic<int> g_signal{0};

extern "C" void on_stop(int sig) {
  if (g_signal.exchange(sig) != 0) {
    // Second Ctrl-C: the user insists; die the default way.
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_signal.load(std::memory_order_relaxed) != 0; }
bool stop_requested_within(std::chrono::milliseconds grace) {
  const auto until = std::chrono::steady_clock::now() + grace;
  while (!stop_requested()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

int stop_signal() { return g_signal.load(std::memory_order_relaxed); }

}  // namespace murmur::runtime
