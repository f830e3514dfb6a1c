#include "nn/cuda/model.h"

#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "nn/activations.h"
#include "nn/conv2d.h"
#include "nn/cuda/check.h"
#include "nn/linear.h"

namespace murmur::nn::cuda {
namespace {

// True iff `layer` took over the ReLU after it (Sequential then skips that ReLU).
bool absorbed_next(const Layer& layer) {
  if (auto* l = dynamic_cast<const Linear*>(&layer)) return l->fused_relu();
  if (auto* c = dynamic_cast<const Conv2d*>(&layer)) return c->fused_relu();
  return false;
}

std::size_t round_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

CudaModel::CudaModel(Model& host, Context& cx)
    : host_(host), cx_(cx), params_(host.params()), grads_(host.grads()),
      buffers_(host.buffers()) {
  Sequential& net = host.net();
  const DeviceArenas arenas{params_, grads_, buffers_};
  shapes_.push_back(net.input());
  root_.push_back(0);
  needs_grad_.push_back(false);
  bool params_below = false;
  for (std::size_t i = 0; i < net.size(); ++i) {
    const Layer& layer = net.layer(i);
    const std::string& name = net.name(i);
    Slot slot;
    slot.skipped = i > 0 && dynamic_cast<const ReLU*>(&layer) != nullptr &&
                   absorbed_next(net.layer(i - 1));
    const std::string prefix = name + ".";
    for (const ArenaEntry& e : host.params().entries())
      slot.has_params = slot.has_params || (!name.empty() && e.name.rfind(prefix, 0) == 0);
    if (!slot.skipped) slot.layer = make_device_layer(layer, name, arenas);
    shapes_.push_back(layer.output_shape(shapes_.back()));
    const std::size_t k = i + 1;
    root_.push_back(layer.is_view() || slot.skipped ? root_[k - 1] : k);
    params_below = params_below || slot.has_params;
    needs_grad_.push_back(params_below);
    slots_.push_back(std::move(slot));
  }
  act_.assign(shapes_.size(), Tensor());
  grad_.assign(shapes_.size(), Tensor());
  loss_ = DeviceBuffer(sizeof(LossSums));
  copy_from_host();
}

void CudaModel::reserve(std::int64_t n) {
  if (n <= capacity_) return;
  cx_.synchronize();  // the old buffers may still be in use by queued work
  const std::size_t count = shapes_.size();
  act_memory_.clear();
  grad_memory_.clear();
  workspace_.clear();
  act_memory_.resize(count);
  grad_memory_.resize(count);
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t bytes = static_cast<std::size_t>(shapes_[k].numel() * n) * sizeof(float);
    if (root_[k] == k) act_memory_[k] = DeviceBuffer(bytes);  // k = 0: the input
    if (root_[k] == k && needs_grad_[k]) grad_memory_[k] = DeviceBuffer(bytes);
  }
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    const std::size_t floats =
        slots_[i].layer ? slots_[i].layer->workspace_floats(shapes_[i], n) : 0;
    workspace_.emplace_back(floats * sizeof(float));
  }
  const std::size_t x_bytes = round_up(shapes_[0].numel() * n * sizeof(float));
  staging_ = PinnedBuffer(x_bytes + round_up(n * sizeof(std::int32_t)) + sizeof(LossSums));
  labels_ = DeviceBuffer(n * sizeof(std::int32_t));
  capacity_ = n;
}

const Tensor& CudaModel::forward(const float* x, const std::int32_t* labels, std::int64_t n,
                                 const StepContext& ctx) {
  if (n <= 0) throw Error(fmt::format("CudaModel: a batch of {}", n));
  reserve(n);
  batch_ = n;
  // The previous call synchronized before returning, so the staging buffer is free.
  auto* stage = static_cast<std::byte*>(staging_.data());
  const std::size_t x_bytes = shapes_[0].numel() * n * sizeof(float);
  const std::size_t labels_at = round_up(shapes_[0].numel() * capacity_ * sizeof(float));
  std::memcpy(stage, x, x_bytes);
  std::memcpy(stage + labels_at, labels, n * sizeof(std::int32_t));
  MURMUR_CUDA_CHECK(cudaMemcpyAsync(act_memory_[0].data(), stage, x_bytes,
                                    cudaMemcpyHostToDevice, cx_.stream()));
  MURMUR_CUDA_CHECK(cudaMemcpyAsync(labels_.data(), stage + labels_at, n * sizeof(std::int32_t),
                                    cudaMemcpyHostToDevice, cx_.stream()));
  for (std::size_t k = 0; k < shapes_.size(); ++k) {
    act_[k] = Tensor(act_memory_[root_[k]].floats(), shapes_[k].batched(n));
    grad_[k] = needs_grad_[k] ? Tensor(grad_memory_[root_[k]].floats(), shapes_[k].batched(n))
                              : Tensor();
  }
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].layer) slots_[i].layer->forward(cx_, act_[i], act_[i + 1], workspace_[i].floats(), ctx);
  }
  return act_.back();
}

void CudaModel::backward(const StepContext& ctx) {
  for (std::size_t i = slots_.size(); i-- > 0;) {
    if (!needs_grad_[i + 1]) break;  // nothing below has parameters
    Slot& s = slots_[i];
    if (!s.layer) continue;  // a view or a fused ReLU
    s.layer->backward(cx_, act_[i], act_[i + 1], grad_[i + 1], grad_[i], workspace_[i].floats(),
                      ctx);
  }
}

LossSums CudaModel::finish_loss(std::int64_t n) {
  auto* stage = static_cast<std::byte*>(staging_.data()) + staging_.size() - sizeof(LossSums);
  MURMUR_CUDA_CHECK(cudaMemcpyAsync(stage, loss_.data(), sizeof(LossSums), cudaMemcpyDeviceToHost,
                                    cx_.stream()));
  cx_.synchronize();
  LossSums sums;
  std::memcpy(&sums, stage, sizeof(sums));
  if (sums.bad_row >= 0) {
    throw DataError(fmt::format("cross-entropy: label {} of row {} is outside [0, {})",
                                sums.bad_label, sums.bad_row, shapes_.back().numel()));
  }
  return sums;
}

float CudaModel::train_batch(const float* x, const std::int32_t* labels, int n, Rng& rng) {
  StepContext ctx{.training = true, .rng = &rng, .accumulate_grads = false};
  const Tensor& logits = forward(x, labels, n, ctx);
  softmax_cross_entropy(logits.data, static_cast<const std::int32_t*>(labels_.data()), n,
                        logits.row_size(), grad_.back().data, loss_.get<LossSums>(),
                        cx_.stream());
  backward(ctx);
  return static_cast<float>(finish_loss(n).loss_sum / n);
}

EvalResult CudaModel::evaluate(const float* x, const std::int32_t* labels, int n) {
  StepContext ctx{.training = false, .rng = nullptr, .accumulate_grads = false};
  const Tensor& logits = forward(x, labels, n, ctx);
  softmax_cross_entropy(logits.data, static_cast<const std::int32_t*>(labels_.data()), n,
                        logits.row_size(), nullptr, loss_.get<LossSums>(), cx_.stream());
  const LossSums sums = finish_loss(n);
  return EvalResult{sums.loss_sum, sums.correct, n};
}

void CudaModel::copy_to_host() {
  params_.copy_to_host(host_.params(), cx_.stream());
  buffers_.copy_to_host(host_.buffers(), cx_.stream());
  cx_.synchronize();
}

void CudaModel::copy_from_host() {
  params_.copy_from_host(host_.params(), cx_.stream());
  buffers_.copy_from_host(host_.buffers(), cx_.stream());
  cx_.synchronize();
}

}  // namespace murmur::nn::cuda
