#include "runtime/evaluate.h"

#include <algorithm>

#include "runtime/checkpoint.h"

namespace murmur::runtime {

Evaluation evaluate(nn::Model& model, const nn::Dataset& data, int batch_size) {
  return evaluate_in_batches(data, batch_size, [&](const float* x, const std::int32_t* y, int n) {
    return model.evaluate(x, y, n);
  });
}

Evaluation evaluate_checkpoint(const ExperimentConfig& config, const std::filesystem::path& file) {
  const nn::Dataset test = nn::load_dataset(config.data, config.run.seed, /*train=*/false);
  Rng init(config.run.seed);
  auto model = nn::Model::create(config.model, {test.channels, test.height, test.width},
                                 test.classes, init);
  load_model(file, model->params(), model->buffers());
  return evaluate(*model, test, config.eval.batch_size);
}

}  // namespace murmur::runtime
