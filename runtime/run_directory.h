// The run directory of one peer process, kept the same way by murmur-peer and by a program that
// links murmur (api/): where it is, how a peer started without murmur-launch meets the others
// through it, what is written there before training (config.yaml, by rank 0) and after it (this
// rank's result.json; at the lowest averaged rank, every rank's result that came over the
// transport, and summary.json where no launcher writes one). Not thread-safe.
#pragma once

#include <filesystem>
#include <string>

#include "core/config.h"
#include "runtime/peer.h"

namespace murmur::runtime {

// `out` if given, else run.out, else runs/<run.name>.
std::filesystem::path run_directory(const ExperimentConfig& config, const std::string& out = "");

// Started by mpirun or srun without murmur-launch, and told no way to meet: a rendezvous
// directory of this launch's own in the run directory (which must then be shared, as the
// launcher's is). Its id (transport::launch_id) keeps an earlier launch's address files out.
void use_launch_rendezvous(ExperimentConfig& config, const std::filesystem::path& run_dir);

// Before training: makes run_dir/rank<r>/ and removes this rank's result.json of an earlier run
// (it must not be read back as this one's); rank 0 writes the resolved config (config.yaml,
// config.json), which --summarize and murmur-launch read. Throws IoError naming the file.
void open_run_directory(const ExperimentConfig& config, const std::filesystem::path& run_dir);

// After training: writes this rank's result.json and, at the rank that gathered the others'
// over the transport (result.gathered), theirs too, so that a run directory that is not shared
// holds the whole run where that rank ran. Writes summary.json where this peer is the one to:
// a lone peer, or the rank that evaluated the average model of a run that murmur-launch did
// not start (which writes it itself, with the exit codes). Returns whether it wrote it.
bool close_run_directory(const ExperimentConfig& config, const std::filesystem::path& run_dir,
                         const PeerResult& result, double wall_time_s);

}  // namespace murmur::runtime
