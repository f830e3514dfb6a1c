#include "nn/model.h"

#include <fmt/format.h>

#include "core/error.h"
#include "nn/activations.h"
#include "nn/cnn.h"
#include "nn/dropout.h"
#include "nn/flatten.h"
#include "nn/linear.h"
#include "nn/loss.h"

namespace murmur::nn {
namespace {

// torch: nn.Sequential-free module with attributes fc1, fc2, ... so state_dict names are
// "fc1.weight", "fc1.bias", ...; Flatten, ReLU and Dropout hold no state.
void build_mlp(Sequential& net, const ModelConfig& config, Shape3 input, int classes) {
  net.emplace<Flatten>("");
  std::int64_t width = static_cast<std::int64_t>(input.c) * input.h * input.w;
  int index = 1;
  for (int hidden : config.hidden) {
    net.emplace<Linear>(fmt::format("fc{}", index++), width, hidden);
    net.emplace<ReLU>("");
    if (config.dropout > 0) net.emplace<Dropout>("", config.dropout);
    width = hidden;
  }
  net.emplace<Linear>(fmt::format("fc{}", index), width, classes);
}

}  // namespace

std::unique_ptr<Model> Model::create(const ModelConfig& config, Shape3 input, int classes,
                                     Rng& rng) {
  if (input.c <= 0 || input.h <= 0 || input.w <= 0)
    throw ConfigError(fmt::format("model: bad input shape {}x{}x{}", input.c, input.h, input.w));
  if (classes < 2) throw ConfigError(fmt::format("model: {} classes (need >= 2)", classes));
  std::unique_ptr<Model> model(new Model());
  model->name_ = config.name;
  model->input_ = input;
  model->classes_ = classes;
  Sequential& net = model->net_;
  if (config.name == "mlp") {
    build_mlp(net, config, input, classes);
  } else if (config.name == "logreg") {
    ModelConfig linear = config;
    linear.hidden.clear();
    build_mlp(net, linear, input, classes);
  } else if (config.name == "cnn") {
    build_cnn(net, input, classes);
  } else {
    throw ConfigError(fmt::format("model.name: unknown model '{}'", config.name));
  }
  net.build(Shape{input.c, input.h, input.w}, model->params_, model->grads_, model->buffers_);
  if (!(net.output() == Shape{classes}))
    throw ConfigError(fmt::format("model '{}': output shape {} for {} classes", config.name,
                                  net.output().str(), classes));
  net.init(rng);
  return model;
}

float Model::train_batch(const float* x, const std::int32_t* labels, int n, Rng& rng) {
  StepContext ctx{.training = true, .rng = &rng, .accumulate_grads = false};
  const Tensor& logits = net_.forward(x, n, ctx);
  Tensor& grad = net_.output_grad();
  const LossResult loss = softmax_cross_entropy(logits, labels, &grad);
  net_.backward(ctx);
  return static_cast<float>(loss.loss_sum / n);
}

EvalResult Model::evaluate(const float* x, const std::int32_t* labels, int n) {
  StepContext ctx{.training = false, .rng = nullptr, .accumulate_grads = false};
  const Tensor& logits = net_.forward(x, n, ctx);
  const LossResult loss = softmax_cross_entropy(logits, labels, nullptr);
  return EvalResult{loss.loss_sum, loss.correct, n};
}

std::int64_t Model::num_params() const {
  return static_cast<std::int64_t>(params_.num_elements());
}

std::string Model::describe() const {
  return fmt::format("{} ({}x{}x{} -> {} classes)\n{}  {} parameters", name_, input_.c, input_.h,
                     input_.w, classes_, net_.describe(), num_params());
}

}  // namespace murmur::nn
