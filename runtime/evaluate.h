// Evaluation of a model on a whole data set, in batches, in evaluation mode.
#pragma once

#include <algorithm>
#include <cstdint>
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

// The batching and the totals shared by every backend: `eval(x, labels, n)` evaluates one batch
// (nn::Model::evaluate on the CPU, CudaModel::evaluate on a GPU) and returns its nn::EvalResult.
template <class EvalBatch>
Evaluation evaluate_in_batches(const nn::Dataset& data, int batch_size, EvalBatch&& eval) {
  nn::EvalResult total;
  for (std::int64_t begin = 0; begin < data.size; begin += batch_size) {
    const int n = static_cast<int>(std::min<std::int64_t>(batch_size, data.size - begin));
    const nn::EvalResult r = eval(data.image(begin), data.labels.data() + begin, n);
    total.loss_sum += r.loss_sum;
    total.correct += r.correct;
    total.count += r.count;
  }
  Evaluation e;
  e.count = total.count;
  if (total.count > 0) {
    e.loss = total.loss_sum / static_cast<double>(total.count);
    e.accuracy = static_cast<double>(total.correct) / static_cast<double>(total.count);
  }
  return e;
}

// Builds the config's model, loads its tensors from a checkpoint (final.safetensors, or any
// resume checkpoint; refused whole if any check fails: CheckpointError naming the file) and
// evaluates it on the config's test set.
Evaluation evaluate_checkpoint(const ExperimentConfig& config, const std::filesystem::path& file);

}  // namespace murmur::runtime
