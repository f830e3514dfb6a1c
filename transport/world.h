// Where a peer learns its rank and the world size, with no coordinator: the config
// (world.rank, world.size), else the launcher's environment (MURMUR_RANK, MURMUR_WORLD_SIZE),
// else Slurm's (SLURM_PROCID, SLURM_NTASKS), else Open MPI's (OMPI_COMM_WORLD_RANK,
// OMPI_COMM_WORLD_SIZE). Pure apart from reading the environment through `getenv`; thread-safe.
#pragma once

#include <functional>
#include <string>

#include "core/config.h"

namespace murmur::transport {

struct WorldInfo {
  int rank = 0;
  int size = 1;
  std::string source;  // where the rank came from: "config", "MURMUR_RANK", "SLURM_PROCID", ...
};

using Getenv = std::function<const char*(const char*)>;

// Resolves rank and size. world.size = 1 (the default) yields to a size from the environment;
// a size set in the config wins. Throws ConfigError naming the variable if a value is not an
// integer, if no rank is found for a world of more than one, or if rank >= size.
WorldInfo resolve_world(const WorldConfig& config, const Getenv& getenv);
WorldInfo resolve_world(const WorldConfig& config);  // with std::getenv

}  // namespace murmur::transport
