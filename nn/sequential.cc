#include "nn/sequential.h"

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::nn {
namespace {

constexpr std::size_t round_up(std::size_t floats) {
  return (floats + Arena::kAlignFloats - 1) / Arena::kAlignFloats * Arena::kAlignFloats;
}

}  // namespace

Layer& Sequential::add(std::string name, std::unique_ptr<Layer> layer) {
  if (built_) throw Error("Sequential: add() after build()");
  if (!name.empty())
    for (const Slot& s : layers_)
      if (s.name == name) throw Error(fmt::format("Sequential: layer name '{}' used twice", name));
  layers_.push_back(Slot{std::move(name), std::move(layer)});
  return *layers_.back().layer;
}

void Sequential::build(const Shape& input, Arena& params, Arena& grads, Arena& buffers) {
  if (built_) throw Error("Sequential: build() called twice");
  if (layers_.empty()) throw ConfigError("Sequential: no layers");
  input_ = input;
  shapes_.clear();
  Shape shape = input;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Slot& s = layers_[i];
    shape = s.layer->output_shape(shape);
    shapes_.push_back(shape);
    const std::size_t before = params.size();
    ParamDeclarer decl(params, buffers, s.name.empty() ? "" : s.name + ".");
    s.layer->declare(decl);
    s.has_params = params.size() > before;
    s.first_param = before;  // an entry index until the arena is allocated
    s.view = s.layer->is_view();
  }
  // Fusion: a layer may take over the elementwise work of the one after it.
  for (std::size_t i = 0; i + 1 < layers_.size(); ++i) {
    Slot& s = layers_[i];
    Slot& next = layers_[i + 1];
    if (!s.skipped && !s.view && !next.has_params && s.layer->absorb(*next.layer))
      next.skipped = true;
  }
  params.allocate();
  grads = params.clone_layout();
  for (Slot& s : layers_) {
    if (s.has_params) s.first_param = params.entries()[s.first_param].offset;
  }
  buffers.allocate();
  ParamViews views(params, grads, buffers);
  for (Slot& s : layers_) s.layer->bind(views);

  // root_[k]: the slot whose memory activation k (and its gradient) lives in; 0 is the input.
  const std::size_t count = layers_.size() + 1;
  root_.assign(count, 0);
  needs_grad_.assign(count, false);
  bool params_below = false;
  for (std::size_t k = 1; k < count; ++k) {
    const Slot& producer = layers_[k - 1];
    root_[k] = (producer.view || producer.skipped) ? root_[k - 1] : k;
    params_below = params_below || producer.has_params;
    needs_grad_[k] = params_below;
  }
  act_.assign(count, Tensor());
  grad_.assign(count, Tensor());
  act_offset_.assign(count, 0);
  grad_offset_.assign(count, 0);
  ws_offset_.assign(layers_.size(), 0);
  built_ = true;
}

void Sequential::init(Rng& rng) {
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Rng layer_rng = rng.fork(i);
    layers_[i].layer->init(layer_rng);
  }
}

void Sequential::reserve_forward(std::int64_t n) {
  if (n <= forward_capacity_) return;
  std::size_t total = 0;
  Shape in = input_;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const std::size_t k = i + 1;
    if (root_[k] == k) {
      act_offset_[k] = total;
      total += round_up(static_cast<std::size_t>(shapes_[i].numel() * n));
    }
    ws_offset_[i] = total;
    total += round_up(layers_[i].layer->workspace_floats(in, n));
    in = shapes_[i];
  }
  forward_memory_ = HostBuffer::floats(total);
  forward_capacity_ = n;
}

void Sequential::reserve_backward(std::int64_t n) {
  if (n <= backward_capacity_) return;
  std::size_t total = 0;
  for (std::size_t k = 1; k < root_.size(); ++k) {
    if (root_[k] == k && needs_grad_[k]) {
      grad_offset_[k] = total;
      total += round_up(static_cast<std::size_t>(shapes_[k - 1].numel() * n));
    }
  }
  backward_memory_ = HostBuffer::floats(total);
  backward_capacity_ = n;
}

const Tensor& Sequential::forward(const float* x, std::int64_t n, const StepContext& ctx) {
  if (!built_) throw Error("Sequential: forward() before build()");
  if (n <= 0) throw Error(fmt::format("Sequential: forward() on a batch of {}", n));
  reserve_forward(n);
  batch_ = n;
  trained_ = false;
  float* base = forward_memory_.as_floats().data();
  // The input is only read: layers never write their `in`.
  act_[0] = Tensor(const_cast<float*>(x), input_.batched(n));
  Shape in = input_;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const std::size_t k = i + 1;
    const Shape out_shape = shapes_[i].batched(n);
    float* data = root_[k] == 0 ? act_[0].data : base + act_offset_[root_[k]];
    act_[k] = Tensor(data, out_shape);
    Slot& s = layers_[i];
    if (!s.view && !s.skipped) {
      std::span<float> ws(base + ws_offset_[i], s.layer->workspace_floats(in, n));
      s.layer->forward(act_[i], act_[k], ws, ctx);
    }
    in = shapes_[i];
  }
  return act_.back();
}

Tensor& Sequential::output_grad() {
  if (batch_ == 0) throw Error("Sequential: output_grad() before forward()");
  reserve_backward(batch_);
  float* base = backward_memory_.as_floats().data();
  for (std::size_t k = 1; k < root_.size(); ++k)
    grad_[k] = needs_grad_[k] ? Tensor(base + grad_offset_[root_[k]], shapes_[k - 1].batched(batch_))
                              : Tensor();
  trained_ = true;
  return grad_.back();
}

void Sequential::backward(const StepContext& ctx) {
  if (!trained_) throw Error("Sequential: backward() without output_grad() after forward()");
  float* fbase = forward_memory_.as_floats().data();
  for (std::size_t i = layers_.size(); i-- > 0;) {
    Slot& s = layers_[i];
    if (!needs_grad_[i + 1]) break;  // nothing below has parameters
    if (s.view || s.skipped) continue;
    const Shape in = i == 0 ? input_ : shapes_[i - 1];
    std::span<float> ws(fbase + ws_offset_[i], s.layer->workspace_floats(in, batch_));
    s.layer->backward(act_[i], act_[i + 1], grad_[i + 1], grad_[i], ws, ctx);
    if (ctx.grads_ready && s.has_params) (*ctx.grads_ready)(s.first_param);
  }
  trained_ = false;
  if (ctx.grads_ready) (*ctx.grads_ready)(0);
}

std::string Sequential::describe() const {
  std::string out;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const Slot& s = layers_[i];
    out += fmt::format("  {:<6} {:<40} -> {}{}\n", s.name.empty() ? "-" : s.name,
                       s.layer->describe(), built_ ? shapes_[i].str() : "?",
                       s.skipped ? "  (fused into the layer above)" : "");
  }
  return out;
}

}  // namespace murmur::nn
