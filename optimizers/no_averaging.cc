#include "optimizers/no_averaging.h"

namespace murmur::optimizers {

const AlgorithmInfo kNoAveraging{
    .name = "none",
    .summary = "no averaging: each peer trains alone",
    .needs = GraphNeeds::kNone,
    .make = [](const AveragingContext&) -> std::unique_ptr<Averaging> {
      return std::make_unique<NoAveraging>();
    },
    .plan = [](const PlanContext&) { return CommPlan{}; }};  // sends nothing

}  // namespace murmur::optimizers
