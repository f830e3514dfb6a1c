// Elastic averaging without a center (`easgd`): EASGD (Zhang, Choromanska and LeCun 2015) keeps
// one center variable x~ that each of the p workers is pulled towards by alpha and that moves by
// beta = p alpha towards their mean (their eq. (5)-(6); they recommend beta = 0.9). Here each
// peer keeps its own copy z_i of the center, and the neighbors gossip those: after every H-th
// local step, z_i <- sum_j W_ij z_j (one exchange of z with this round's neighbors, as D-PSGD
// exchanges x), then d = x_i - z_i, x_i <- x_i - alpha d, z_i <- z_i + beta d. With the z's in
// consensus this is EASGD's step (the mean of z moves by beta (mean x - z)). The models never
// cross the network: they explore apart, held by the elastic force, and the z's are what a run
// evaluates and averages at the end (debiased()). Each elastic step keeps p x_i + z_i and the
// gossip keeps sum z, so with z_i(0) = x_i(0) a consensus is at the mean.
// The same bytes per round as D-PSGD on the same graph. Not thread-safe.
#pragma once

#include <memory>
#include <vector>

#include "optimizers/algorithm.h"
#include "optimizers/mixing_schedule.h"
#include "optimizers/recv_slots.h"
#include "transport/tag.h"

namespace murmur::optimizers {

extern const AlgorithmInfo kEasgd;

class Easgd final : public Averaging {
 public:
  // z starts as this peer's initial model.
  explicit Easgd(const AveragingContext& ctx);
  void after_step(std::int64_t step) override;
  // The model to evaluate is the peer's copy of the center, z_i: EASGD's output is its center
  // variable (Zhang et al. report the center's test error); the x's explore around it.
  bool debiased(std::span<float> out) override;
  // A restarted peer's model is its neighbors' mean: its elastic variable starts there too.
  void rejoined() override;
  std::vector<std::pair<std::string, std::span<float>>> state() override;

 private:
  membership::Neighborhood& hood_;
  device::Device& device_;
  std::span<float> params_;
  int local_steps_;
  float alpha_, beta_;
  unsigned purpose_;
  transport::TagLayout layout_;
  MixingSchedule schedule_;
  device::Array center_, diff_;  // z_i, and x_i - z_i on its way
  std::unique_ptr<transport::Region> center_region_;
  RecvSlots slots_;
  std::vector<const float*> inputs_;
  std::vector<float> weights_;
};

}  // namespace murmur::optimizers
