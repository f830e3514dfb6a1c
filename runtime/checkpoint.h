// Checkpoints of one peer, in its directory rank<r>/. Two kinds of file, both safetensors with the
// model's tensors under their PyTorch state_dict names (so numpy or torch read them as they are):
//   a resume checkpoint (ckpt-<step>.safetensors, final.resume.safetensors) adds the resume state
//     under names and metadata keys prefixed "murmur." (optimizer buffers, step, epoch, RNG and
//     data-loader state, algorithm state);
//   the final model (final.safetensors) holds the model alone, which torch.nn's
//     load_state_dict(strict=True) takes: no tensor but the model's.
// Written atomically (temp file, fsync, rename) with a CRC32C of the data, so a crash never leaves
// a half-written file under a checkpoint's name; read back only after every check passes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/rng.h"
#include "nn/batch_loader.h"

namespace murmur::runtime {

// Everything besides the arenas that a resumed run needs to continue exactly.
struct ResumeState {
  std::int64_t step = 0;            // local steps completed
  nn::BatchLoader::State loader;
  Rng::State rng{};                 // the peer's training RNG (dropout)
  // algorithm scalars (push-sum weight), the optimizer's step count, data.shuffle's shard
  std::map<std::string, std::string> extra;
  std::string config_json;          // the resolved config of the run that wrote it (on load)
};

// Named flat float arrays saved beside the model (optimizer momentum, algorithm buffers).
struct FlatState {
  std::string name;
  std::span<float> data;
};

// Writes a resume checkpoint: params and buffers (state_dict names), `flat` as "murmur.<name>"
// 1-D tensors, and `state` in the metadata. Throws CheckpointError/IoError naming the file.
void save_checkpoint(const std::filesystem::path& file, const Arena& params, const Arena& buffers,
                     std::span<const FlatState> flat, const ResumeState& state,
                     const std::string& config_json);

// Writes the model alone: params and buffers under their state_dict names, and no other tensor.
// The metadata names the step and the run's config (provenance; torch ignores it).
// Throws CheckpointError/IoError naming the file.
void save_model(const std::filesystem::path& file, const Arena& params, const Arena& buffers,
                std::int64_t step, const std::string& config_json);

// Reads the resume checkpoint `file` into the arenas and flat arrays (which must have the saved
// sizes) and returns the resume state. Verifies every tensor before changing anything, so a bad
// file leaves the model as it was. Throws CheckpointError naming the file and what is wrong (a
// final model file is refused: it holds no resume state).
ResumeState load_checkpoint(const std::filesystem::path& file, Arena& params, Arena& buffers,
                            std::span<FlatState> flat);

// Reads the model's tensors from either kind of file into the arenas (for evaluation). Checks as
// load_checkpoint does; the resume state, if any, is ignored.
void load_model(const std::filesystem::path& file, Arena& params, Arena& buffers);

// rank<r>/final.safetensors, the model at the end, and final.resume.safetensors beside it, the
// resume checkpoint of the same step.
std::filesystem::path final_model_path(const std::filesystem::path& dir);
std::filesystem::path final_resume_path(const std::filesystem::path& dir);

// The files in `dir` to resume from, newest (highest step) first: final.resume.safetensors (else
// final.safetensors, which load_checkpoint takes only from a murmur that wrote the resume state
// into it, and otherwise refuses with a message saying why), then "ckpt-<step>.safetensors".
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& dir);
std::filesystem::path periodic_checkpoint_path(const std::filesystem::path& dir, std::int64_t step);
// Deletes all but the `keep` newest periodic checkpoints.
void prune_checkpoints(const std::filesystem::path& dir, int keep);

}  // namespace murmur::runtime
