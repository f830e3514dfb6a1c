#include "nn/dataset.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "nn/idx.h"
#include "nn/synthetic.h"

namespace murmur::nn {
namespace {

constexpr int kFashionClasses = 10;

std::filesystem::path existing(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    throw DataError(
        fmt::format("{}: no such file (install Debian's dataset-fashion-mnist, or set data.path)",
                    file.string()));
  return file;
}

Dataset load_fashion_mnist(const DataConfig& config, bool train) {
  const std::filesystem::path dir = config.path;
  const std::string split = train ? "train" : "t10k";
  const auto images_file = existing(dir / (split + "-images-idx3-ubyte.gz"));
  const auto labels_file = existing(dir / (split + "-labels-idx1-ubyte.gz"));
  IdxImages raw = read_idx_images(images_file);
  const std::vector<std::uint8_t> labels = read_idx_labels(labels_file, kFashionClasses);
  if (static_cast<std::int64_t>(labels.size()) != raw.count)
    throw DataError(fmt::format("{}: {} labels, but {} holds {} images", labels_file.string(),
                                labels.size(), images_file.string(), raw.count));

  Dataset d;
  d.size = raw.count;
  d.channels = 1;
  d.height = raw.rows;
  d.width = raw.cols;
  d.classes = kFashionClasses;
  // One multiply-add per pixel: x/255 then (x - mean)/std folded into scale and shift.
  const float scale = config.normalize ? static_cast<float>(1.0 / (255.0 * config.std))
                                       : static_cast<float>(1.0 / 255.0);
  const float shift = config.normalize ? static_cast<float>(-config.mean / config.std) : 0.0f;
  d.images.resize(raw.pixels.size());
  const std::uint8_t* __restrict in = raw.pixels.data();
  float* __restrict out = d.images.data();
  for (std::size_t i = 0; i < raw.pixels.size(); ++i) out[i] = in[i] * scale + shift;
  d.labels.assign(labels.begin(), labels.end());
  return d;
}

}  // namespace

Dataset load_dataset(const DataConfig& config, std::uint64_t seed, bool train) {
  if (config.name == "fashion_mnist") return load_fashion_mnist(config, train);
  if (config.name == "synthetic") return make_synthetic(config.synthetic, seed, train);
  throw ConfigError(
      fmt::format("data.name: unknown data set '{}' (fashion_mnist | synthetic)", config.name));
}

}  // namespace murmur::nn
