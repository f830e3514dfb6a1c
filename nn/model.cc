#include "nn/model.h"

#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/name_table.h"
#include "core/names.h"
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

void build_logreg(Sequential& net, const ModelConfig& config, Shape3 input, int classes) {
  ModelConfig linear = config;
  linear.hidden.clear();
  build_mlp(net, linear, input, classes);
}

void build_cnn_model(Sequential& net, const ModelConfig&, Shape3 input, int classes) {
  build_cnn(net, input, classes);
}

// The models, one row each: what model.name takes.
struct ModelEntry {
  std::string_view name;
  void (*build)(Sequential&, const ModelConfig&, Shape3, int);
  std::optional<Shape3> fixed_input;  // the only input shape it takes, if any
};
const ModelEntry kModels[] = {
    {"mlp", build_mlp, std::nullopt},
    {"logreg", build_logreg, std::nullopt},
    {"cnn", build_cnn_model, Shape3{1, 28, 28}},
};
[[maybe_unused]] const bool kRegistered =
    register_names("model.name", names_of(std::span<const ModelEntry>(kModels)));

const ModelEntry& find_model(std::string_view name) {
  return find_named(std::span<const ModelEntry>(kModels), name, "model.name", "model");
}

}  // namespace

std::vector<std::string_view> model_names() { return names_of(std::span<const ModelEntry>(kModels)); }

void check_model(const ModelConfig& config, const DataConfig& data) {
  const auto [c, h, w] = image_shape(data);
  const Shape3 input{c, h, w};
  const ModelEntry& m = find_model(config.name);
  if (m.fixed_input && (input.h != m.fixed_input->h || input.w != m.fixed_input->w ||
                        input.c != m.fixed_input->c)) {
    throw ConfigError(fmt::format(
        "model.name: {} needs {}x{} images with {} channel(s), but the data has {}x{}x{} (with "
        "data.name synthetic, set data.synthetic.height and width)",
        config.name, m.fixed_input->h, m.fixed_input->w, m.fixed_input->c, input.c, input.h,
        input.w));
  }
}

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
  find_model(config.name).build(net, config, input, classes);
  net.build(Shape{input.c, input.h, input.w}, model->params_, model->grads_, model->buffers_);
  if (!(net.output() == Shape{classes}))
    throw ConfigError(fmt::format("model '{}': output shape {} for {} classes", config.name,
                                  net.output().str(), classes));
  net.init(rng);
  return model;
}

float Model::train_batch(const float* x, const std::int32_t* labels, int n, Rng& rng,
                         const std::function<void(std::size_t)>* grads_ready) {
  StepContext ctx{.training = true, .rng = &rng, .accumulate_grads = false,
                  .grads_ready = grads_ready};
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
