#include "nn/synthetic.h"

#include <vector>

#include "core/rng.h"

namespace murmur::nn {
namespace {
// Stream ids under the seed: the centres are their own stream, so the train and test splits
// (and any split size) see the same centres.
constexpr std::uint64_t kCentreStream = 0x63656e74;  // "cent"
constexpr std::uint64_t kTrainStream = 1;
constexpr std::uint64_t kTestStream = 2;
}  // namespace

Dataset make_synthetic(const SyntheticConfig& config, std::uint64_t seed, bool train) {
  Dataset d;
  d.size = train ? config.train_size : config.test_size;
  d.channels = 1;
  d.height = config.height;
  d.width = config.width;
  d.classes = config.classes;
  const std::int64_t dim = d.sample_floats();

  const Rng root(seed);
  Rng centre_rng = root.fork(kCentreStream);
  std::vector<float> centres(static_cast<std::size_t>(config.classes * dim));
  for (float& c : centres) c = static_cast<float>(centre_rng.normal());

  Rng rng = root.fork(train ? kTrainStream : kTestStream);
  const float noise = static_cast<float>(config.noise);
  d.images.resize(static_cast<std::size_t>(d.size * dim));
  d.labels.resize(static_cast<std::size_t>(d.size));
  for (std::int64_t i = 0; i < d.size; ++i) {
    const auto label = static_cast<std::int32_t>(i % config.classes);
    d.labels[i] = label;
    const float* centre = centres.data() + label * dim;
    float* out = d.images.data() + i * dim;
    for (std::int64_t k = 0; k < dim; ++k)
      out[k] = centre[k] + noise * static_cast<float>(rng.normal());
  }
  return d;
}

}  // namespace murmur::nn
