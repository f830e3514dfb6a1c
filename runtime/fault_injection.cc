#include "runtime/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"

namespace murmur::runtime {

namespace {
constexpr const char* kVariable = "MURMUR_FAULT_KILL";

std::int64_t parse_int(std::string_view s, std::string_view spec) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) {
    throw ConfigError(fmt::format("{}={}: expected rank:step[,rank:step...] with whole numbers",
                                  kVariable, spec));
  }
  return v;
}
}  // namespace

std::int64_t fault_kill_step(std::string_view spec, int rank) {
  std::int64_t found = 0;
  std::string_view rest = spec;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const auto colon = item.find(':');
    if (colon == std::string_view::npos) parse_int("x", spec);  // throws with the message
    const auto r = parse_int(item.substr(0, colon), spec);
    const auto step = parse_int(item.substr(colon + 1), spec);
    if (r == rank) found = step;
  }
  return found;
}

std::int64_t fault_kill_step_from_env(int rank) {
  const char* v = std::getenv(kVariable);
  return v == nullptr ? 0 : fault_kill_step(v, rank);
}

void kill_self(int rank, std::int64_t step) {
  log().warn("rank {}: {} asks for SIGKILL after step {}: killing myself", rank, kVariable, step);
  log().flush();
  ::kill(::getpid(), SIGKILL);
  std::abort();  // not reached
}

}  // namespace murmur::runtime
