// Layer: one differentiable step of a Sequential network, on batches of samples ([n, ...]).
// A layer owns no activation memory: Sequential allocates every activation, gradient and
// workspace buffer once per batch capacity and hands out views, so a training step allocates
// nothing. Parameters live in the model's Arenas. Life of a layer:
//   declare() -> (arenas allocated) -> bind() -> init() -> { forward(); backward(); }*
// Layers are not thread-safe; a layer may use the compute threads (nn/cpu/threads.h) inside a call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/arena.h"
#include "core/rng.h"
#include "nn/tensor.h"

namespace murmur::nn {

// Passed to Layer::declare: names are prefixed with the layer's name, so Linear declaring
// "weight" inside the layer named "fc1" creates "fc1.weight" (the PyTorch state_dict name).
class ParamDeclarer {
 public:
  ParamDeclarer(Arena& params, Arena& buffers, std::string prefix)
      : params_(params), buffers_(buffers), prefix_(std::move(prefix)) {}
  // A trained parameter (a gradient of the same shape is kept in the grads arena). Returns
  // the index to pass to ParamViews::param/grad.
  std::size_t param(std::string_view name, std::vector<std::int64_t> shape) {
    return params_.declare(prefix_ + std::string(name), std::move(shape));
  }
  // A non-trained state tensor (BatchNorm running_mean, running_var, num_batches_tracked).
  std::size_t buffer(std::string_view name, std::vector<std::int64_t> shape) {
    return buffers_.declare(prefix_ + std::string(name), std::move(shape));
  }

 private:
  Arena& params_;
  Arena& buffers_;
  std::string prefix_;
};

// Passed to Layer::bind once the arenas are allocated. grads has the layout of params.
class ParamViews {
 public:
  ParamViews(Arena& params, Arena& grads, Arena& buffers)
      : params_(params), grads_(grads), buffers_(buffers) {}
  std::span<float> param(std::size_t index) { return params_.view(index); }
  std::span<float> grad(std::size_t index) { return grads_.view(index); }
  std::span<float> buffer(std::size_t index) { return buffers_.view(index); }

 private:
  Arena& params_;
  Arena& grads_;
  Arena& buffers_;
};

// What one forward/backward call may need besides tensors.
struct StepContext {
  bool training = false;   // dropout active, batch norm uses batch statistics and updates buffers
  Rng* rng = nullptr;      // dropout masks; non-null whenever training
  // false: backward overwrites each parameter gradient (Model::train_batch, saves a memset);
  // true: backward adds to it (gradient accumulation over micro-batches).
  bool accumulate_grads = false;
  // Wait-free backprop: called during backward() as soon as every parameter gradient from this
  // float offset of the grads arena to its end is final (layers run last to first, and their
  // parameters lie in forward order), so an exchange of those floats may start. May be null.
  const std::function<void(std::size_t offset)>* grads_ready = nullptr;
};

class Layer {
 public:
  virtual ~Layer() = default;

  // "Linear", "ReLU", "Conv2d" ... for describe() and error messages.
  virtual std::string kind() const = 0;
  // One line: kind and arguments, e.g. "Linear(784 -> 512)".
  virtual std::string describe() const { return kind(); }

  // Declares parameters and buffers (names relative to the layer). Default: none.
  virtual void declare(ParamDeclarer& decl) {}
  // Takes the views of what declare() declared. Default: nothing to bind.
  virtual void bind(ParamViews& views) {}
  // Draws initial parameters (PyTorch's default init for the layer type) and resets buffers.
  virtual void init(Rng& rng) {}

  // Output shape of one sample given the input shape of one sample (no batch dimension).
  // Throws ConfigError if the input shape does not fit the layer.
  virtual Shape output_shape(const Shape& input) const = 0;
  // Floats of scratch memory forward+backward need for a batch of n samples of `input` shape
  // (a dropout mask, pooling argmax, im2col columns). It is kept from forward to backward.
  virtual std::size_t workspace_floats(const Shape& input, std::int64_t n) const { return 0; }

  // True iff the output is the input reinterpreted (Flatten): Sequential then aliases the
  // buffers and calls neither forward nor backward.
  virtual bool is_view() const { return false; }
  // Offered the next layer; returns true iff this layer takes over `next`'s elementwise work in
  // its own forward and backward (Linear + ReLU -> fused bias + ReLU). Sequential then skips
  // `next`, whose output aliases this layer's output.
  virtual bool absorb(const Layer& next) { return false; }

  // in: [n, input...]; out: [n, output...], preallocated (contents undefined before the call).
  // Must cache in `workspace` anything backward needs beyond in and out.
  virtual void forward(const Tensor& in, Tensor& out, std::span<float> workspace,
                       const StepContext& ctx) = 0;
  // Given dL/d(out) in grad_out, writes dL/d(in) into grad_in unless grad_in is undefined
  // (the network's input needs no gradient) and writes or adds (ctx.accumulate_grads) the
  // parameter gradients. in, out and workspace hold what the matching forward left there.
  // grad_out may be overwritten (scratch). Layers without parameters ignore accumulate_grads.
  virtual void backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                        std::span<float> workspace, const StepContext& ctx) = 0;
};

}  // namespace murmur::nn
