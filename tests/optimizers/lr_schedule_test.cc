// LR schedules against known values. The cosine and step values are torch 1.13's, from:
//   import torch
//   p = torch.nn.Parameter(torch.zeros(1)); opt = torch.optim.SGD([p], lr=0.1)
//   s = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100, eta_min=0.001)
//   (record opt.param_groups[0]["lr"], then opt.step(); s.step(), for t in 0..100)
//   -> 0: 0.1, 1: 0.0999755747381, 25: 0.0855017856687, 50: 0.0505, 75: 0.0154982143313,
//      99: 0.0010244252619, 100: 0.001
//   StepLR(opt, step_size=30, gamma=0.5) -> 0: 0.1, 29: 0.1, 30: 0.05, 59: 0.05, 60: 0.025,
//      99: 0.0125
#include "optimizers/lr_schedule.h"

#include <catch2/catch.hpp>

#include "core/error.h"

using murmur::OptimizerConfig;
using murmur::ScheduleConfig;
using murmur::optimizers::LrSchedule;

namespace {
OptimizerConfig with_lr(double lr) {
  OptimizerConfig c;
  c.lr = lr;
  return c;
}
ScheduleConfig schedule(const char* name) {
  ScheduleConfig s;
  s.name = name;
  return s;
}
}  // namespace

TEST_CASE("constant schedule", "[optimizers][lr_schedule]") {
  LrSchedule s(with_lr(0.05), schedule("constant"), 100);
  CHECK(s.at(0) == 0.05);
  CHECK(s.at(99) == 0.05);
  CHECK(s.at(1000) == 0.05);
}

TEST_CASE("cosine schedule matches torch CosineAnnealingLR", "[optimizers][lr_schedule]") {
  auto cfg = schedule("cosine");
  cfg.min_lr = 0.001;
  LrSchedule s(with_lr(0.1), cfg, 100);
  CHECK(s.at(0) == Approx(0.1).epsilon(1e-12));
  CHECK(s.at(1) == Approx(0.0999755747381).epsilon(1e-10));
  CHECK(s.at(25) == Approx(0.0855017856687).epsilon(1e-10));
  CHECK(s.at(50) == Approx(0.0505).epsilon(1e-10));
  CHECK(s.at(75) == Approx(0.0154982143313).epsilon(1e-10));
  CHECK(s.at(99) == Approx(0.0010244252619).epsilon(1e-10));
  CHECK(s.at(100) == Approx(0.001).epsilon(1e-12));
  CHECK(s.at(5000) == Approx(0.001).epsilon(1e-12));  // held at min_lr past the end
}

TEST_CASE("step schedule matches torch StepLR", "[optimizers][lr_schedule]") {
  auto cfg = schedule("step");
  cfg.step_every = 30;
  cfg.gamma = 0.5;
  LrSchedule s(with_lr(0.1), cfg, 100);
  CHECK(s.at(0) == Approx(0.1));
  CHECK(s.at(29) == Approx(0.1));
  CHECK(s.at(30) == Approx(0.05));
  CHECK(s.at(59) == Approx(0.05));
  CHECK(s.at(60) == Approx(0.025));
  CHECK(s.at(99) == Approx(0.0125));
}

TEST_CASE("linear warm-up, then the schedule over the remaining steps",
          "[optimizers][lr_schedule]") {
  auto cfg = schedule("cosine");
  cfg.warmup_steps = 10;
  cfg.min_lr = 0.0;
  LrSchedule s(with_lr(0.1), cfg, 110);
  CHECK(s.at(0) == Approx(0.01));
  CHECK(s.at(4) == Approx(0.05));
  CHECK(s.at(9) == Approx(0.1));
  // After warm-up, cosine over T = 100 steps: s' = 50 is the midpoint.
  CHECK(s.at(10) == Approx(0.1));
  CHECK(s.at(60) == Approx(0.05));
  CHECK(s.at(110) == Approx(0.0).margin(1e-15));

  auto step_cfg = schedule("step");
  step_cfg.warmup_steps = 5;
  step_cfg.step_every = 10;
  step_cfg.gamma = 0.1;
  LrSchedule st(with_lr(1.0), step_cfg, 100);
  CHECK(st.at(2) == Approx(0.6));
  CHECK(st.at(5) == Approx(1.0));
  CHECK(st.at(14) == Approx(1.0));
  CHECK(st.at(15) == Approx(0.1));
}

TEST_CASE("cosine with nothing left after warm-up stays at lr", "[optimizers][lr_schedule]") {
  auto cfg = schedule("cosine");
  cfg.warmup_steps = 10;
  LrSchedule s(with_lr(0.1), cfg, 10);
  CHECK(s.at(10) == Approx(0.1));
  CHECK(s.at(20) == Approx(0.1));
}

TEST_CASE("schedule rejects bad input", "[optimizers][lr_schedule]") {
  CHECK_THROWS_AS(LrSchedule(with_lr(0.1), schedule("exponential"), 10), murmur::ConfigError);
  CHECK_THROWS_AS(LrSchedule(with_lr(0.1), schedule("cosine"), -1), murmur::ConfigError);
}

TEST_CASE("the lr scales with the global batch by scale_rule", "[optimizers][lr_schedule]") {
  murmur::TrainConfig t;
  t.batch_size = 64;
  using murmur::optimizers::lr_scale;
  CHECK(lr_scale(t, 64) == 1.0);  // "none", the default
  t.schedule.scale_rule = "linear";
  CHECK(lr_scale(t, 64) == 64.0);  // against one peer's batch: the number of peers
  CHECK(lr_scale(t, 1) == 1.0);
  t.schedule.reference_batch = 256;  // Goyal et al.'s: 0.1 per 256 samples
  CHECK(lr_scale(t, 16) == 4.0);
  t.schedule.scale_rule = "sqrt";
  CHECK(lr_scale(t, 16) == 2.0);
  t.schedule.scale_rule = "quadratic";
  CHECK_THROWS_AS(lr_scale(t, 16), murmur::ConfigError);
}
