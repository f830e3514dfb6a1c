// Where a peer learns its rank and the world size, with no coordinator: the config
// (world.rank, world.size), else the launcher's environment (MURMUR_RANK, MURMUR_WORLD_SIZE),
// else Slurm's (SLURM_PROCID, SLURM_NTASKS), else Open MPI's (OMPI_COMM_WORLD_RANK,
// OMPI_COMM_WORLD_SIZE). Pure apart from reading the environment through `getenv`; thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// The non-negative integer in $`name`; nullopt when unset or empty. Throws ConfigError naming
// the variable for anything else.
std::optional<int> read_int(const Getenv& getenv, const char* name);

// Slurm's compressed tasks per node ("2(x3),1") as one count per node ([2, 2, 2, 1]). Throws
// ConfigError naming `variable` for anything else.
std::vector<int> slurm_tasks_per_node(std::string_view list, std::string_view variable);

// How many peers share this peer's node (each sizes its thread pools to its share of the cores):
// $MURMUR_LOCAL_SIZE (murmur-launch sets it), else Open MPI's $OMPI_COMM_WORLD_LOCAL_SIZE, else
// Slurm's tasks on this node: $SLURM_TASKS_PER_NODE ("2(x3),1": 2 on each of the first three
// nodes, 1 on the fourth) at $SLURM_NODEID; else 1. Throws ConfigError naming the variable for
// a value that is not a positive count, or a node id past the list.
int local_size(const Getenv& getenv);
int local_size();  // with std::getenv

// This peer's place among the peers of its node (its GPU is local_rank % devices):
// $MURMUR_LOCAL_RANK (murmur-launch), else Slurm's $SLURM_LOCALID, else Open MPI's
// $OMPI_COMM_WORLD_LOCAL_RANK, else `rank` (a node of its own, or a launcher that says nothing).
// Throws ConfigError naming the variable for a value that is not a non-negative integer.
int local_rank(int rank, const Getenv& getenv);
int local_rank(int rank);  // with std::getenv

// What tells this launch apart from every other one that starts the same processes, for a
// rendezvous directory of its own: Slurm's "$SLURM_JOB_ID.$SLURM_STEP_ID" (srun), else PMIx's
// $PMIX_NAMESPACE (Open MPI's mpirun); nullopt for any other start. Only characters safe in a
// file name are kept.
std::optional<std::string> launch_id(const Getenv& getenv);
std::optional<std::string> launch_id();  // with std::getenv

}  // namespace murmur::transport
