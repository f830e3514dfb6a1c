// The batch of every epoch, and the steps they add up to, with and without a batch ramp.
#include "runtime/batch_plan.h"

#include <catch2/catch.hpp>

#include "core/error.h"

using murmur::runtime::BatchPlan;

namespace {
murmur::TrainConfig train(int epochs, int batch, double factor = 1, int every = 1, int cap = 0) {
  murmur::TrainConfig t;
  t.epochs = epochs;
  t.batch_size = batch;
  t.batch_ramp.factor = factor;
  t.batch_ramp.every_epochs = every;
  t.batch_ramp.max_batch = cap;
  return t;
}
}  // namespace

TEST_CASE("without a ramp every epoch has train.batch_size and the same steps", "[runtime][batch_plan]") {
  const BatchPlan plan(train(3, 64), 15000);  // Fashion-MNIST over 4 peers
  CHECK(plan.batches() == std::vector<int>{64, 64, 64});
  CHECK(plan.total_steps() == 3 * 235);  // ceil(15000 / 64)
  CHECK(plan.max_batch() == 64);
  CHECK(plan.batch_at(0) == 64);
  CHECK(plan.batch_at(704) == 64);
  CHECK(!plan.ends_epoch(0));
  CHECK(!plan.ends_epoch(234));
  CHECK(plan.ends_epoch(235));
  CHECK(plan.ends_epoch(705));
  CHECK(plan.epoch_at(470) == 2.0);
  CHECK(plan.epoch_at(235 + 47) == Approx(1.2));
}

TEST_CASE("a batch ramp grows the batch and shortens the epochs", "[runtime][batch_plan]") {
  // Doubling every 2 epochs, capped at 200: 50, 50, 100, 100, 200, 200.
  const BatchPlan plan(train(6, 50, 2.0, 2, 200), 1000);
  CHECK(plan.batches() == std::vector<int>{50, 50, 100, 100, 200, 200});
  CHECK(plan.total_steps() == 20 + 20 + 10 + 10 + 5 + 5);
  CHECK(plan.max_batch() == 200);
  CHECK(plan.batch_at(39) == 50);
  CHECK(plan.batch_at(40) == 100);
  CHECK(plan.batch_at(59) == 100);
  CHECK(plan.batch_at(60) == 200);
  CHECK(plan.batch_at(69) == 200);
  CHECK(plan.ends_epoch(20));
  CHECK(plan.ends_epoch(40));
  CHECK(plan.ends_epoch(50));
  CHECK(!plan.ends_epoch(45));
  CHECK(plan.ends_epoch(70));
  CHECK(plan.epoch_at(45) == 2.5);
  CHECK(plan.epoch_at(70) == 6.0);
  // Smith et al.'s factor 5, rounded; no batch beyond the epoch itself.
  const BatchPlan five(train(3, 64, 5.0), 1000);
  CHECK(five.batches() == std::vector<int>{64, 320, 1000});
  CHECK(five.total_steps() == 16 + 4 + 1);
  CHECK_THROWS_AS(BatchPlan(train(1, 64), 0), murmur::ConfigError);
}
