#include "nn/dataset.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/name_table.h"
#include "core/names.h"
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

namespace {

// The data sets, one row each: what data.name takes.
struct DatasetEntry {
  std::string_view name;
  Dataset (*load)(const DataConfig&, std::uint64_t seed, bool train);
  std::array<int, 3> (*shape)(const DataConfig&);
};
const DatasetEntry kDatasets[] = {
    {"fashion_mnist",
     [](const DataConfig& c, std::uint64_t, bool train) { return load_fashion_mnist(c, train); },
     [](const DataConfig&) { return std::array<int, 3>{1, 28, 28}; }},
    {"synthetic",
     [](const DataConfig& c, std::uint64_t seed, bool train) {
       return make_synthetic(c.synthetic, seed, train);
     },
     [](const DataConfig& c) { return std::array<int, 3>{1, c.synthetic.height, c.synthetic.width}; }},
};
[[maybe_unused]] const bool kRegistered = register_names("data.name", dataset_names());

const DatasetEntry& find_dataset(std::string_view name) {
  return find_named(std::span<const DatasetEntry>(kDatasets), name, "data.name", "data set");
}

}  // namespace

std::vector<std::string_view> dataset_names() {
  return names_of(std::span<const DatasetEntry>(kDatasets));
}

std::array<int, 3> image_shape(const DataConfig& config) { return find_dataset(config.name).shape(config); }

Dataset load_dataset(const DataConfig& config, std::uint64_t seed, bool train) {
  return find_dataset(config.name).load(config, seed, train);
}

}  // namespace murmur::nn
