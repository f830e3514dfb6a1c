// The learning rate as a pure function of the local step: a linear warm-up, then a constant,
// step-decay or cosine schedule over the remaining steps. Immutable after construction, so any
// thread may call at().
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/config.h"

namespace murmur::optimizers {

// The names train.schedule.name takes ("constant", "step", "cosine").
std::vector<std::string_view> schedule_names();

// The names train.schedule.scale_rule takes ("none", "linear", "sqrt").
std::vector<std::string_view> scale_rule_names();

// What optimizer.lr is multiplied by for a global batch of batch_size * world_size samples per
// step, against schedule.reference_batch (0: train.batch_size, the batch the lr was tuned for
// on one peer): 1, global / reference (Goyal et al. 2017's linear scaling rule, meant with a
// warm-up), or its square root. Throws ConfigError for an unknown rule.
double lr_scale(const TrainConfig& train, int world_size);

class LrSchedule {
 public:
  // Base lr from optimizer.lr; the rest from schedule. total_steps is the length of the whole
  // run, warm-up included. Throws ConfigError for an unknown schedule name or total_steps < 0.
  LrSchedule(const OptimizerConfig& optimizer, const ScheduleConfig& schedule,
             std::int64_t total_steps);

  // The lr for 0-based `step`. Warm-up (W = warmup_steps): lr * (s + 1) / W for s < W, so the
  // first step already moves and step W - 1 reaches lr. After it, with s' = s - W and
  // T = total_steps - W:
  // - constant: lr
  // - step: lr * gamma^floor(s' / step_every)
  // - cosine: min_lr + (lr - min_lr) (1 + cos(pi s' / T)) / 2, torch's CosineAnnealingLR with
  //   T_max = T; held at min_lr for s' >= T, and lr when T <= 0 (nothing left to anneal).
  double at(std::int64_t step) const;

 enum class Kind { kConstant, kStep, kCosine };

 private:
  Kind kind_;
  double lr_;
  double min_lr_;
  double gamma_;
  std::int64_t step_every_;
  std::int64_t warmup_;
  std::int64_t total_;
};

}  // namespace murmur::optimizers
