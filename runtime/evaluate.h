// Evaluation of a model on a whole data set, in batches, in evaluation mode.
#pragma once

#include <filesystem>

#include "core/config.h"
#include "nn/dataset.h"
#include "nn/model.h"

namespace murmur::runtime {

struct Evaluation {
  double loss = 0;      // mean cross-entropy
  double accuracy = 0;  // fraction correct, in [0, 1]
  std::int64_t count = 0;
};

Evaluation evaluate(nn::Model& model, const nn::Dataset& data, int batch_size);

// Builds the config's model, loads its tensors from a checkpoint (refused whole if any check
// fails: CheckpointError naming the file) and evaluates it on the config's test set.
Evaluation evaluate_checkpoint(const ExperimentConfig& config, const std::filesystem::path& file);

}  // namespace murmur::runtime
