#include "transport/world.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::transport {

namespace {

// The process's own environment, for the overloads that take none.
const char* process_env(const char* name) { return std::getenv(name); }

// (rank variable, size variable), in order of precedence.
constexpr std::array<std::pair<const char*, const char*>, 3> kSources{{
    {"MURMUR_RANK", "MURMUR_WORLD_SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
}};

}  // namespace

std::optional<int> read_int(const Getenv& getenv, const char* name) {
  const char* text = getenv(name);
  if (!text || !*text) return std::nullopt;
  int value = 0;
  std::string_view s(text);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value < 0) {
    throw ConfigError(fmt::format("${}={}: not a non-negative integer", name, text));
  }
  return value;
}

WorldInfo resolve_world(const WorldConfig& config, const Getenv& getenv) {
  WorldInfo w;
  w.size = config.size;
  std::optional<int> env_size;
  if (config.rank >= 0) {
    w.rank = config.rank;
    w.source = "config";
  } else {
    for (auto [rank_var, size_var] : kSources) {
      if (auto r = read_int(getenv, rank_var)) {
        w.rank = *r;
        w.source = rank_var;
        env_size = read_int(getenv, size_var);
        break;
      }
    }
  }
  if (!env_size) {
    for (auto [rank_var, size_var] : kSources) {
      if ((env_size = read_int(getenv, size_var))) break;
    }
  }
  if (config.size == 1 && env_size) w.size = *env_size;
  if (w.source.empty()) {
    if (w.size > 1) {
      throw ConfigError(fmt::format(
          "world.rank: not set, and none of MURMUR_RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK is in "
          "the environment (world of {})", w.size));
    }
    w.source = "default";
  }
  if (w.size < 1 || w.rank >= w.size) {
    throw ConfigError(fmt::format("world: rank {} (from {}) outside a world of {}", w.rank,
                                  w.source, w.size));
  }
  return w;
}

WorldInfo resolve_world(const WorldConfig& config) {
  return resolve_world(config, process_env);
}

std::vector<int> slurm_tasks_per_node(std::string_view list, std::string_view variable) {
  auto bad = [&] {
    return ConfigError(fmt::format("${}={}: not a list of counts such as '2(x3),1'", variable, list));
  };
  std::vector<int> counts;
  std::size_t at = 0;
  while (at <= list.size()) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string_view entry = list.substr(at, comma - at);
    int count = 0, repeat = 1;
    auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), count);
    if (ec != std::errc() || count < 1) throw bad();
    std::string_view rest(end, entry.data() + entry.size() - end);
    if (!rest.empty()) {
      if (rest.size() < 4 || rest.substr(0, 2) != "(x" || rest.back() != ')') throw bad();
      const std::string_view times = rest.substr(2, rest.size() - 3);
      auto [tend, tec] = std::from_chars(times.data(), times.data() + times.size(), repeat);
      if (tec != std::errc() || tend != times.data() + times.size() || repeat < 1) throw bad();
    }
    if (counts.size() + static_cast<std::size_t>(repeat) > (std::size_t{1} << 20)) throw bad();
    counts.insert(counts.end(), static_cast<std::size_t>(repeat), count);
    at = comma + 1;
  }
  return counts;
}

namespace {

// The count of tasks on node `node` in Slurm's compressed list ("2(x3),1").
int slurm_tasks_on(std::string_view list, int node) {
  // The whole list is checked before it is read: a bad entry past this node is still an error.
  const std::vector<int> counts = slurm_tasks_per_node(list, "SLURM_TASKS_PER_NODE");
  if (node < static_cast<int>(counts.size())) return counts[static_cast<std::size_t>(node)];
  throw ConfigError(fmt::format("$SLURM_NODEID={}: past the {} node(s) of "
                                "$SLURM_TASKS_PER_NODE={}", node, counts.size(), list));
}

}  // namespace

int local_size(const Getenv& getenv) {
  for (const char* name : {"MURMUR_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    if (auto n = read_int(getenv, name)) {
      if (*n < 1) throw ConfigError(fmt::format("${}=0: a node holds at least this peer", name));
      return *n;
    }
  }
  const char* tasks = getenv("SLURM_TASKS_PER_NODE");
  if (tasks && *tasks) return slurm_tasks_on(tasks, read_int(getenv, "SLURM_NODEID").value_or(0));
  return 1;
}

int local_size() {
  return local_size(process_env);
}

int local_rank(int rank, const Getenv& getenv) {
  for (const char* name : {"MURMUR_LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"}) {
    if (auto r = read_int(getenv, name)) return *r;
  }
  return rank;
}

int local_rank(int rank) {
  return local_rank(rank, process_env);
}

std::optional<std::string> launch_id(const Getenv& getenv) {
  const auto value = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    std::string out;
    for (const char* c = v ? v : ""; *c; ++c) {
      if (std::isalnum(static_cast<unsigned char>(*c)) || *c == '.' || *c == '-' || *c == '_') out += *c;
    }
    return out;
  };
  if (const std::string job = value("SLURM_JOB_ID"); !job.empty()) {
    const std::string step = value("SLURM_STEP_ID");
    return "slurm-" + job + (step.empty() ? "" : "." + step);
  }
  if (const std::string ns = value("PMIX_NAMESPACE"); !ns.empty()) return "pmix-" + ns;
  return std::nullopt;
}

std::optional<std::string> launch_id() {
  return launch_id(process_env);
}

}  // namespace murmur::transport
