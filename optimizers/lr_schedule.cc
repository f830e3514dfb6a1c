#include "optimizers/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "core/error.h"
#include "core/name_table.h"
#include "core/names.h"

namespace murmur::optimizers {

namespace {
// The schedules, one row each: what train.schedule.name takes.
struct ScheduleEntry {
  std::string_view name;
  LrSchedule::Kind kind;
};
constexpr ScheduleEntry kSchedules[] = {
    {"constant", LrSchedule::Kind::kConstant},
    {"step", LrSchedule::Kind::kStep},
    {"cosine", LrSchedule::Kind::kCosine},
};
[[maybe_unused]] const bool kRegistered = register_names("train.schedule.name", schedule_names());

struct ScaleRule {
  std::string_view name;
  double (*scale)(double ratio);
};
constexpr ScaleRule kScaleRules[] = {
    {"none", [](double) { return 1.0; }},
    {"linear", [](double ratio) { return ratio; }},
    {"sqrt", [](double ratio) { return std::sqrt(ratio); }},
};
[[maybe_unused]] const bool kScaleRegistered =
    register_names("train.schedule.scale_rule", scale_rule_names());
}  // namespace

std::vector<std::string_view> schedule_names() {
  return names_of(std::span<const ScheduleEntry>(kSchedules));
}

std::vector<std::string_view> scale_rule_names() {
  return names_of(std::span<const ScaleRule>(kScaleRules));
}

double lr_scale(const TrainConfig& train, int world_size) {
  const ScaleRule& rule = find_named(std::span<const ScaleRule>(kScaleRules),
                                     train.schedule.scale_rule, "train.schedule.scale_rule",
                                     "learning-rate scaling rule");
  const int reference =
      train.schedule.reference_batch > 0 ? train.schedule.reference_batch : train.batch_size;
  const double global = static_cast<double>(train.batch_size) * std::max(1, world_size);
  return rule.scale(global / reference);
}

LrSchedule::LrSchedule(const OptimizerConfig& optimizer, const ScheduleConfig& schedule,
                       std::int64_t total_steps)
    : lr_(optimizer.lr),
      min_lr_(schedule.min_lr),
      gamma_(schedule.gamma),
      step_every_(std::max(1, schedule.step_every)),
      warmup_(std::max(0, schedule.warmup_steps)),
      total_(total_steps) {
  kind_ = find_named(std::span<const ScheduleEntry>(kSchedules), schedule.name,
                     "train.schedule.name", "schedule").kind;
  if (total_steps < 0)
    throw ConfigError(fmt::format("lr schedule: total_steps {} < 0", total_steps));
}

double LrSchedule::at(std::int64_t step) const {
  step = std::max<std::int64_t>(step, 0);
  if (step < warmup_) return lr_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  const std::int64_t s = step - warmup_;
  const std::int64_t t = total_ - warmup_;
  switch (kind_) {
    case Kind::kConstant:
      return lr_;
    case Kind::kStep:
      return lr_ * std::pow(gamma_, static_cast<double>(s / step_every_));
    case Kind::kCosine:
      if (t <= 0) return lr_;
      if (s >= t) return min_lr_;
      return min_lr_ + (lr_ - min_lr_) *
                           (1.0 + std::cos(std::numbers::pi * static_cast<double>(s) /
                                           static_cast<double>(t))) /
                           2.0;
  }
  return lr_;
}

}  // namespace murmur::optimizers
