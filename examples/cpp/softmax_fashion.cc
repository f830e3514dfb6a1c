// A model murmur does not know, trained by murmur: softmax regression (784 -> 10) on
// Fashion-MNIST, written here from scratch as any program's own model would be. murmur only
// averages its parameters: the lines marked "murmur" are all it takes.
//
//   tools/murmur-launch -n 4 --config configs/ring.yaml -- build-example/softmax_fashion --epochs 3
//
// Each peer trains on its shard (every world_size-th image) with plain minibatch SGD.
#include <murmur/murmur.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr int kPixels = 784, kClasses = 10;

// One IDX file (gzipped), its payload as bytes after the header.
std::vector<unsigned char> read_idx(const std::string& file, int header_bytes) {
  gzFile f = gzopen(file.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error(file + ": cannot open (apt-get install dataset-fashion-mnist)");
  std::vector<unsigned char> bytes;
  unsigned char buffer[1 << 16];
  for (int n; (n = gzread(f, buffer, sizeof buffer)) > 0;) bytes.insert(bytes.end(), buffer, buffer + n);
  gzclose(f);
  if (bytes.size() < static_cast<std::size_t>(header_bytes)) throw std::runtime_error(file + ": truncated");
  return {bytes.begin() + header_bytes, bytes.end()};
}

struct Data {
  std::vector<float> x;  // n x 784, scaled to [0, 1]
  std::vector<int> y;
  int n() const { return static_cast<int>(y.size()); }
};

Data load(const std::string& dir, const std::string& prefix) {
  const auto pixels = read_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz", 16);
  const auto labels = read_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", 8);
  Data d;
  d.x.reserve(pixels.size());
  for (const unsigned char p : pixels) d.x.push_back(p / 255.0f);
  d.y.assign(labels.begin(), labels.end());
  return d;
}

// The model: W (10 x 784) then b (10), one flat vector (murmur averages it in place).
struct Softmax {
  std::vector<float> params = std::vector<float>(kClasses * kPixels + kClasses, 0.0f);
  float* w() { return params.data(); }
  float* b() { return params.data() + kClasses * kPixels; }

  void logits(const float* x, float* out) {
    for (int c = 0; c < kClasses; ++c) {
      float z = b()[c];
      for (int i = 0; i < kPixels; ++i) z += w()[c * kPixels + i] * x[i];
      out[c] = z;
    }
  }

  // One SGD step on the batch `rows` of `d`; returns the mean cross-entropy.
  double step(const Data& d, const std::vector<int>& rows, float lr) {
    std::vector<float> grad(params.size(), 0.0f);
    double loss = 0;
    for (const int r : rows) {
      const float* x = &d.x[static_cast<std::size_t>(r) * kPixels];
      float z[kClasses];
      logits(x, z);
      const float top = *std::max_element(z, z + kClasses);
      float sum = 0;
      for (float& v : z) sum += (v = std::exp(v - top));
      loss -= std::log(z[d.y[r]] / sum);
      for (int c = 0; c < kClasses; ++c) {
        const float g = z[c] / sum - (c == d.y[r] ? 1.0f : 0.0f);
        for (int i = 0; i < kPixels; ++i) grad[c * kPixels + i] += g * x[i];
        grad[kClasses * kPixels + c] += g;
      }
    }
    for (std::size_t k = 0; k < params.size(); ++k) params[k] -= lr * grad[k] / rows.size();
    return loss / rows.size();
  }

  double accuracy(const Data& d) {
    int right = 0;
    for (int r = 0; r < d.n(); ++r) {
      float z[kClasses];
      logits(&d.x[static_cast<std::size_t>(r) * kPixels], z);
      right += std::max_element(z, z + kClasses) - z == d.y[r];
    }
    return static_cast<double>(right) / d.n();
  }
};

}  // namespace

int main(int argc, char** argv) {
  int epochs = 3;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--epochs") epochs = std::atoi(argv[i + 1]);
  }
  const char* dir_env = std::getenv("FASHION_MNIST");
  const std::string dir = dir_env ? dir_env : "/usr/share/datasets/fashion-mnist";
  try {
    murmur::Communicator comm;  // murmur: the config and the world from murmur-launch
    const Data train = load(dir, "train"), test = load(dir, "t10k");
    std::vector<int> shard;
    for (int r = comm.rank(); r < train.n(); r += comm.world_size()) shard.push_back(r);

    Softmax model;
    comm.attach(std::vector<murmur::Buffer>{{model.params.data(), model.params.size()}},
                std::vector<std::string>{"weight [10, 784] float32", "bias [10] float32"});  // murmur
    constexpr int kBatch = 64;
    std::mt19937 rng(1234 + comm.rank());
    std::int64_t step = 0;
    // Every peer takes as many steps (a neighbor waits for each exchange), whatever its shard.
    const int steps_per_epoch = train.n() / comm.world_size() / kBatch;
    for (int epoch = 1; epoch <= epochs && !comm.stop_requested(); ++epoch) {
      std::shuffle(shard.begin(), shard.end(), rng);
      for (int k = 0; k < steps_per_epoch && !comm.stop_requested(); ++k) {
        const std::vector<int> rows(shard.begin() + k * kBatch, shard.begin() + (k + 1) * kBatch);
        const double loss = model.step(train, rows, 0.1f);
        comm.after_step(++step, loss, kBatch);  // murmur: the averaging of this round
      }
      comm.flush();
      comm.log_eval({model.accuracy(test)}, epoch);  // murmur: metrics.jsonl, time to accuracy
    }
    if (comm.stop_requested()) return 128 + comm.stop_signal();  // a checkpoint would go here
    const murmur::Average average = comm.average();  // murmur: every peer now holds the mean
    murmur::Evaluation avg;
    if (average.evaluator) avg.accuracy = model.accuracy(test);
    comm.finish(avg);  // murmur: result.json, summary.json
    std::printf("rank %d: %lld steps; average model %.2f%%, consensus distance %.3g\n", comm.rank(),
                static_cast<long long>(step), 100 * model.accuracy(test), average.consensus_distance);
  } catch (const murmur::Error& e) {
    std::fprintf(stderr, "softmax_fashion: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "softmax_fashion: %s\n", e.what());
    return 1;
  }
  return 0;
}
