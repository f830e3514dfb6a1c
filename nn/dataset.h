// An in-memory image classification data set: normalized float images (NCHW, contiguous) and
// int32 labels. Loaded once per peer and then read-only, so any number of threads may read it.
// Which samples a peer trains on is decided by nn/partition.h; batches come from
// nn/batch_loader.h.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/config.h"

namespace murmur::nn {

struct Dataset {
  std::int64_t size = 0;
  int channels = 0;
  int height = 0;
  int width = 0;
  int classes = 0;
  std::vector<float> images;         // size * channels * height * width, normalized
  std::vector<std::int32_t> labels;  // size, each in [0, classes)

  std::int64_t sample_floats() const {
    return static_cast<std::int64_t>(channels) * height * width;
  }
  const float* image(std::int64_t i) const { return images.data() + i * sample_floats(); }
};

// The names data.name takes ("fashion_mnist", "synthetic").
std::vector<std::string_view> dataset_names();
// The channels, height and width of the images `config` names, without loading them. Throws
// ConfigError for an unknown name.
std::array<int, 3> image_shape(const DataConfig& config);

// Loads the train or test split named by `config.name`:
// - "fashion_mnist": the four IDX files under config.path (Debian's dataset-fashion-mnist);
//   pixels scaled to [0, 1], then (x - mean) / std if config.normalize.
// - "synthetic": make_synthetic(config.synthetic, seed, train); `seed` matters only here.
// Throws DataError for a missing or malformed file, ConfigError for an unknown name.
Dataset load_dataset(const DataConfig& config, std::uint64_t seed, bool train);

}  // namespace murmur::nn
