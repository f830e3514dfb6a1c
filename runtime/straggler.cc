// network.stragglers as a StepHook (step_hook.h).
#include <chrono>
#include <thread>

#include "core/logging.h"
#include "runtime/step_hook.h"

namespace murmur::runtime {
namespace {

class Straggler final : public StepHook {
 public:
  explicit Straggler(double factor) : factor_(factor) {}
  void after_compute(std::int64_t, double compute_s) override {
    std::this_thread::sleep_for(std::chrono::duration<double>((factor_ - 1) * compute_s));
  }

 private:
  double factor_;
};

}  // namespace

std::shared_ptr<StepHook> straggler_hook(const NetworkConfig& network, int rank) {
  const auto it = network.stragglers.find(rank);
  if (it == network.stragglers.end() || it->second <= 1) return nullptr;
  log().info("rank {}: straggler: computes {}x slower (sleeps {} x its compute time per step)",
             rank, it->second, it->second - 1);
  return std::make_shared<Straggler>(it->second);
}

}  // namespace murmur::runtime
