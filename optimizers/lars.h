// LARS (You, Gitman & Ginsburg 2017, "Large Batch Training of Convolutional Networks"): SGD
// with momentum whose step is rescaled per tensor by a trust ratio, so that no layer's update is
// large against its weights when the global batch, and with it the lr, grows. For each weight
// tensor l:
//   trust_l = eta ||w_l|| / (||g_l|| + wd ||w_l||)   (1 where either norm is 0)
//   g_l <- trust_l (g_l + wd w_l)
// and then torch.optim.SGD's momentum step with that g and no further decay. Tensors of one
// dimension (biases, BatchNorm's scale and shift) are not adapted (trust 1, decay as SGD's), as
// the LARS implementations that followed the paper do. Owns a "momentum" buffer (when
// momentum > 0) and a scratch array for the rescaled gradient.
#pragma once

#include <span>

#include "core/arena.h"
#include "optimizers/local_optimizer.h"

namespace murmur::optimizers {

class Lars final : public LocalOptimizer {
 public:
  // `tensors` is the parameter arena's layout (offsets and shapes within the size floats); an
  // empty layout is one weight tensor over the whole arena. Uses config.momentum, nesterov,
  // weight_decay and trust_coefficient. Throws ConfigError for nesterov without momentum, and
  // Error for a tensor outside the arena.
  Lars(const OptimizerConfig& config, device::Device& device, std::size_t size,
       std::span<const ArenaEntry> tensors);

  void step(std::span<float> params, std::span<const float> grads, float lr) override;
  std::vector<std::pair<std::string, std::span<float>>> state() override;

  // The trust ratios of the last step, one per adapted tensor, in layout order (for tests and
  // logs).
  const std::vector<double>& last_trust() const { return last_trust_; }

 private:
  struct Segment {
    std::size_t offset = 0;
    std::size_t numel = 0;
    bool adapted = true;
  };

  float momentum_;
  float weight_decay_;
  bool nesterov_;
  double eta_;
  std::vector<Segment> segments_;
  device::Array buffer_;   // momentum; empty when momentum_ == 0
  device::Array scaled_;   // the rescaled gradient of this step
  device::Array zeros_;    // as long as the largest segment: norms via squared_distance
  std::vector<double> last_trust_;
};

}  // namespace murmur::optimizers
