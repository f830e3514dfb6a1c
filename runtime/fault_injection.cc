#include "runtime/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"

namespace murmur::runtime {

namespace {
constexpr const char* kKill = "MURMUR_FAULT_KILL";
constexpr const char* kStall = "MURMUR_FAULT_STALL";

// The items of `spec` ("a:b[,a:b...]", each of `fields` whole numbers) whose first field is
// `rank`, without it; the last one wins. Throws ConfigError naming `variable` and the form.
std::vector<std::int64_t> parse_for_rank(std::string_view spec, int rank, const char* variable,
                                         std::size_t fields, const char* form) {
  auto bad = [&] {
    return ConfigError(fmt::format("{}={}: expected {} with whole numbers", variable, spec, form));
  };
  std::vector<std::int64_t> found;
  std::string_view rest = spec;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    std::vector<std::int64_t> values;
    for (;;) {
      const auto colon = item.find(':');
      const std::string_view field = item.substr(0, colon);
      std::int64_t v = 0;
      auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
      if (ec != std::errc() || end != field.data() + field.size() || v < 0) throw bad();
      values.push_back(v);
      if (colon == std::string_view::npos) break;
      item = item.substr(colon + 1);
    }
    if (values.size() != fields) throw bad();
    if (values[0] == rank) found.assign(values.begin() + 1, values.end());
  }
  return found;
}

std::string_view env(const char* variable) {
  const char* v = std::getenv(variable);
  return v == nullptr ? std::string_view{} : std::string_view{v};
}
}  // namespace

std::int64_t fault_kill_step(std::string_view spec, int rank) {
  const auto v = parse_for_rank(spec, rank, kKill, 2, "rank:step[,rank:step...]");
  return v.empty() ? 0 : v[0];
}


void kill_self(int rank, std::int64_t step) {
  log().warn("rank {}: {} asks for SIGKILL after step {}: killing myself", rank, kKill, step);
  log().flush();
  ::kill(::getpid(), SIGKILL);
  std::abort();  // not reached
}

FaultStall fault_stall(std::string_view spec, int rank) {
  const auto v = parse_for_rank(spec, rank, kStall, 3, "rank:step:ms[,rank:step:ms...]");
  if (v.empty()) return {};
  return {v[0], std::chrono::milliseconds(v[1])};
}


void stall_self(int rank, const FaultStall& stall) {
  log().warn("rank {}: {} asks for a {} ms stall after step {}: sleeping", rank, kStall,
             stall.pause.count(), stall.step);
  std::this_thread::sleep_for(stall.pause);
}

namespace {

class KillAfter final : public StepHook {
 public:
  KillAfter(int rank, std::int64_t step) : rank_(rank), step_(step) {}
  void after_step(std::int64_t step) override {
    if (step == step_) kill_self(rank_, step);
  }

 private:
  int rank_;
  std::int64_t step_;
};

class StallAfter final : public StepHook {
 public:
  StallAfter(int rank, FaultStall stall) : rank_(rank), stall_(stall) {}
  void after_step(std::int64_t step) override {
    if (step == stall_.step) stall_self(rank_, stall_);
  }

 private:
  int rank_;
  FaultStall stall_;
};

}  // namespace

StepHooks fault_hooks(std::string_view kill_spec, std::string_view stall_spec, int rank) {
  StepHooks hooks;
  if (const std::int64_t step = fault_kill_step(kill_spec, rank); step > 0) {
    hooks.push_back(std::make_shared<KillAfter>(rank, step));
  }
  if (const FaultStall stall = fault_stall(stall_spec, rank); stall.step > 0) {
    hooks.push_back(std::make_shared<StallAfter>(rank, stall));
  }
  return hooks;
}

StepHooks fault_hooks_from_env(int rank) { return fault_hooks(env(kKill), env(kStall), rank); }

}  // namespace murmur::runtime
