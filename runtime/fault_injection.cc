#include "runtime/fault_injection.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
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
constexpr const char* kFreeze = "MURMUR_FAULT_FREEZE";
constexpr const char* kStepMs = "MURMUR_FAULT_STEP_MS";

// The items of `spec` ("a:b[,a:b...]", each of `fields` whole numbers) whose first field is
// `rank`, without it; the last one wins. Throws ConfigError naming `variable` and the form.
std::vector<std::int64_t> parse_for_rank(std::string_view spec, int rank, const char* variable,
                                         std::size_t fields, const char* form,
                                         std::size_t optional = 0) {
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
    if (values.size() < fields - optional || values.size() > fields) throw bad();
    if (values[0] == rank) found.assign(values.begin() + 1, values.end());
  }
  return found;
}

std::string_view env(const char* variable) {
  const char* v = std::getenv(variable);
  return v == nullptr ? std::string_view{} : std::string_view{v};
}
}  // namespace

FaultKill fault_kill(std::string_view spec, int rank) {
  const auto v = parse_for_rank(spec, rank, kKill, 3, "rank:step[:us][,rank:step[:us]...]", 1);
  if (v.empty()) return {};
  return {v[0], std::chrono::microseconds(v.size() > 1 ? v[1] : 0)};
}

void kill_self(int rank, const FaultKill& kill) {
  log().warn("rank {}: {} asks for SIGKILL {} us after step {}: killing myself", rank, kKill,
             kill.delay.count(), kill.step);
  log().flush();
  ::kill(::getpid(), SIGKILL);
  std::abort();  // not reached
}

FaultStall fault_stall(std::string_view spec, int rank) {
  const auto v = parse_for_rank(spec, rank, kStall, 3, "rank:step:ms[,rank:step:ms...]");
  if (v.empty()) return {};
  return {v[0], std::chrono::milliseconds(v[1])};
}


FaultStall fault_freeze(std::string_view spec, int rank) {
  const auto v = parse_for_rank(spec, rank, kFreeze, 3, "rank:step:ms[,rank:step:ms...]");
  if (v.empty()) return {};
  return {v[0], std::chrono::milliseconds(v[1])};
}

void freeze_self(int rank, const FaultStall& freeze) {
  log().warn("rank {}: {} asks for a {} ms freeze (SIGSTOP) after step {}: stopping", rank,
             kFreeze, freeze.pause.count(), freeze.step);
  log().flush();
  const pid_t self = ::getpid();
  const pid_t waker = ::fork();
  if (waker == 0) {
    // Only async-signal-safe calls in the child of a threaded process.
    const auto ms = freeze.pause.count();
    timespec pause{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
    while (::nanosleep(&pause, &pause) != 0) {
    }
    ::kill(self, SIGCONT);
    ::_exit(0);
  }
  if (waker < 0) throw Error(fmt::format("{}: fork failed: the freeze cannot end", kFreeze));
  ::kill(self, SIGSTOP);
  ::waitpid(waker, nullptr, 0);
  log().warn("rank {}: continued after the freeze", rank);
}

void stall_self(int rank, const FaultStall& stall) {
  log().warn("rank {}: {} asks for a {} ms stall after step {}: sleeping", rank, kStall,
             stall.pause.count(), stall.step);
  std::this_thread::sleep_for(stall.pause);
}

namespace {

class KillAfter final : public StepHook {
 public:
  KillAfter(int rank, FaultKill kill) : rank_(rank), kill_(kill) {}
  void after_step(std::int64_t step) override {
    if (step > kill_.step && std::chrono::steady_clock::now() >= deadline_) {
      // The timer thread has not run yet (on a loaded machine it was seen 200 ms late, after a
      // fast run had ended): the kill lands at this step boundary instead.
      kill_self(rank_, kill_);
    }
    if (step != kill_.step) return;
    if (kill_.delay.count() == 0) kill_self(rank_, kill_);
    deadline_ = std::chrono::steady_clock::now() + kill_.delay;
    // The peer goes on meanwhile: the kill lands wherever it is then.
    std::thread([rank = rank_, kill = kill_] {
      std::this_thread::sleep_for(kill.delay);
      kill_self(rank, kill);
    }).detach();
  }

 private:
  int rank_;
  FaultKill kill_;
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
};

class StallAfter final : public StepHook {
 public:
  StallAfter(int rank, FaultStall stall, bool freeze) : rank_(rank), stall_(stall), freeze_(freeze) {}
  void after_step(std::int64_t step) override {
    if (step != stall_.step) return;
    freeze_ ? freeze_self(rank_, stall_) : stall_self(rank_, stall_);
  }

 private:
  int rank_;
  FaultStall stall_;
  bool freeze_;  // the whole process (SIGSTOP), not only the training thread
};

}  // namespace

StepHooks fault_hooks(std::string_view kill_spec, std::string_view stall_spec,
                      std::string_view freeze_spec, int rank) {
  StepHooks hooks;
  if (const FaultKill kill = fault_kill(kill_spec, rank); kill.step > 0) {
    hooks.push_back(std::make_shared<KillAfter>(rank, kill));
  }
  if (const FaultStall stall = fault_stall(stall_spec, rank); stall.step > 0) {
    hooks.push_back(std::make_shared<StallAfter>(rank, stall, false));
  }
  if (const FaultStall freeze = fault_freeze(freeze_spec, rank); freeze.step > 0) {
    hooks.push_back(std::make_shared<StallAfter>(rank, freeze, true));
  }
  return hooks;
}

namespace {
class StepFloor final : public StepHook {
 public:
  explicit StepFloor(std::chrono::milliseconds floor) : floor_(floor) {}
  void after_compute(std::int64_t, double compute_s) override {
    std::this_thread::sleep_for(floor_ - std::chrono::duration<double>(compute_s));
  }

 private:
  std::chrono::milliseconds floor_;
};
}  // namespace

std::shared_ptr<StepHook> fault_step_floor(std::string_view spec) {
  if (spec.empty()) return nullptr;
  int ms = 0;
  auto [end, ec] = std::from_chars(spec.data(), spec.data() + spec.size(), ms);
  if (ec != std::errc() || end != spec.data() + spec.size() || ms < 1 || ms > 60000) {
    throw ConfigError(fmt::format("{}={}: expected a whole number of milliseconds, 1 to 60000", kStepMs, spec));
  }
  return std::make_shared<StepFloor>(std::chrono::milliseconds(ms));
}

StepHooks fault_hooks_from_env(int rank) {
  StepHooks hooks = fault_hooks(env(kKill), env(kStall), env(kFreeze), rank);
  if (auto floor = fault_step_floor(env(kStepMs))) hooks.push_back(std::move(floor));
  return hooks;
}

}  // namespace murmur::runtime
