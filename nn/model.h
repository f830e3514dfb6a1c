// Model: a network built from a ModelConfig, with its parameter, gradient and buffer arenas.
// The runtime drives it one batch at a time; the optimizer and the averaging algorithm work on
// params()/grads() directly (flat arrays), never on layers. Tensor names and layouts are those
// of the equivalent PyTorch module's state_dict. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/arena.h"
#include "core/config.h"
#include "core/rng.h"
#include "nn/dataset.h"
#include "nn/sequential.h"

namespace murmur::nn {

struct Shape3 {
  int c = 1, h = 28, w = 28;
};

struct EvalResult {
  double loss_sum = 0;        // sum over samples of the cross-entropy
  std::int64_t correct = 0;   // samples whose argmax equals the label
  std::int64_t count = 0;
};

// The names model.name takes ("mlp", "logreg", "cnn").
std::vector<std::string_view> model_names();
// Throws ConfigError naming the keys if `config`'s model cannot take the images `data` gives
// (the cnn takes 1x28x28 only), or the model is unknown: before any data is loaded.
void check_model(const ModelConfig& config, const DataConfig& data);

class Model {
 public:
  // Builds "mlp", "logreg" or "cnn" for inputs of `input` shape and `classes` classes, with
  // PyTorch default initialization drawn from `rng` (same seed -> same bits). Throws
  // ConfigError for an unknown model or one that does not fit the input.
  static std::unique_ptr<Model> create(const ModelConfig& config, Shape3 input, int classes,
                                       Rng& rng);

  Arena& params() { return params_; }
  Arena& grads() { return grads_; }      // same layout as params()
  Arena& buffers() { return buffers_; }  // BatchNorm running stats etc.; may be empty
  const Arena& params() const { return params_; }
  const Arena& buffers() const { return buffers_; }

  // x: n rows of c*h*w floats (contiguous), labels in [0, classes). Overwrites grads() with the
  // gradient of the mean cross-entropy over the batch (training mode) and returns that loss.
  // Throws DataError for a label out of range. `grads_ready`, if set, hears during backward
  // from which float offset on the gradients are final (StepContext::grads_ready).
  float train_batch(const float* x, const std::int32_t* labels, int n, Rng& rng,
                    const std::function<void(std::size_t)>* grads_ready = nullptr);
  // Evaluation mode (no dropout, BatchNorm running stats), no gradients.
  EvalResult evaluate(const float* x, const std::int32_t* labels, int n);

  std::int64_t num_params() const;
  Shape3 input() const { return input_; }
  int classes() const { return classes_; }
  // The model's name and one line per layer with output shapes, then the parameter count.
  std::string describe() const;

  Sequential& net() { return net_; }

 private:
  Model() = default;

  std::string name_;
  Shape3 input_;
  int classes_ = 0;
  Arena params_;
  Arena grads_;
  Arena buffers_;
  Sequential net_;
};

}  // namespace murmur::nn
