#include "transport/world.h"

#include <array>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::transport {

namespace {

// (rank variable, size variable), in order of precedence.
constexpr std::array<std::pair<const char*, const char*>, 3> kSources{{
    {"MURMUR_RANK", "MURMUR_WORLD_SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
}};

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

}  // namespace

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
  return resolve_world(config, [](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace murmur::transport
