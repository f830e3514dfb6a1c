#include "runtime/evaluate.h"

#include <algorithm>

#include "runtime/checkpoint.h"

namespace murmur::runtime {

Evaluation evaluate(nn::Model& model, const nn::Dataset& data, int batch_size) {
  nn::EvalResult total;
  for (std::int64_t begin = 0; begin < data.size; begin += batch_size) {
    const int n = static_cast<int>(std::min<std::int64_t>(batch_size, data.size - begin));
    nn::EvalResult r = model.evaluate(data.image(begin), data.labels.data() + begin, n);
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

Evaluation evaluate_checkpoint(const ExperimentConfig& config, const std::filesystem::path& file) {
  const nn::Dataset test = nn::load_dataset(config.data, config.run.seed, /*train=*/false);
  Rng init(config.run.seed);
  auto model = nn::Model::create(config.model, {test.channels, test.height, test.width},
                                 test.classes, init);
  load_checkpoint(file, model->params(), model->buffers(), {});
  return evaluate(*model, test, config.eval.batch_size);
}

}  // namespace murmur::runtime
