// Sequential: a chain of named layers, plus all the memory a step needs. build() declares every
// layer's parameters (names "<layer>.<param>") into the caller's arenas and allocates them;
// forward()/backward() then run over buffers sized for the largest batch seen so far, so steady
// training allocates nothing. Owned by Model; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/host_memory.h"
#include "core/rng.h"
#include "nn/layer.h"
#include "nn/tensor.h"

namespace murmur::nn {

class Sequential {
 public:
  Sequential() = default;
  Sequential(const Sequential&) = delete;
  Sequential& operator=(const Sequential&) = delete;

  // Appends a layer. `name` prefixes its parameters ("fc1"); layers without parameters may
  // pass "". Throws Error after build() or for a duplicate non-empty name.
  Layer& add(std::string name, std::unique_ptr<Layer> layer);
  template <class L, class... Args>
  L& emplace(std::string name, Args&&... args) {
    auto layer = std::make_unique<L>(std::forward<Args>(args)...);
    L& ref = *layer;
    add(std::move(name), std::move(layer));
    return ref;
  }

  // Checks shapes from `input` (one sample), declares parameters into params and buffers,
  // allocates both, makes grads = params.clone_layout() and binds every layer. Fuses layer
  // pairs that agree (Layer::absorb). Throws ConfigError on a shape mismatch.
  void build(const Shape& input, Arena& params, Arena& grads, Arena& buffers);
  bool built() const { return built_; }
  // Calls init on every layer in order, each with its own fork of `rng` (so adding a layer
  // later does not change earlier layers' draws).
  void init(Rng& rng);

  // Runs the network on n samples at x (n rows of input().numel() floats, contiguous; read,
  // never written). Returns the output [n, output()...], valid until the next forward.
  const Tensor& forward(const float* x, std::int64_t n, const StepContext& ctx);
  // dL/d(output) for the last forward's batch: the loss writes it, then backward() reads it.
  Tensor& output_grad();
  // Backpropagates output_grad() through the layers of the last forward (which must have been
  // a forward with the same ctx.training), writing parameter gradients into the grads arena.
  // Calls ctx.grads_ready (if set) after each layer with parameters, and with 0 at the end.
  void backward(const StepContext& ctx);

  const Shape& input() const { return input_; }
  const Shape& output() const { return shapes_.back(); }
  std::size_t size() const { return layers_.size(); }
  Layer& layer(std::size_t i) { return *layers_[i].layer; }
  const std::string& name(std::size_t i) const { return layers_[i].name; }
  // One line per layer: name, description, output shape; fused layers are marked.
  std::string describe() const;

 private:
  struct Slot {
    std::string name;
    std::unique_ptr<Layer> layer;
    bool skipped = false;     // absorbed by the layer before it
    bool view = false;        // output aliases input
    bool has_params = false;  // declared at least one parameter
    std::size_t first_param = 0;  // has_params: the float offset of its first parameter
  };
  void reserve_forward(std::int64_t n);
  void reserve_backward(std::int64_t n);

  std::vector<Slot> layers_;
  Shape input_;
  std::vector<Shape> shapes_;  // shapes_[i] = output of layer i, per sample
  bool built_ = false;
  // Per activation k (0 = input, k = output of layer k - 1): the activation whose memory it
  // shares (views and fused layers alias), and whether its gradient is needed at all (only
  // when some layer below has parameters; the input's never is).
  std::vector<std::size_t> root_;
  std::vector<bool> needs_grad_;

  // Activations: act_[0] is the input (aliases the caller's x), act_[i + 1] is layer i's output.
  std::int64_t forward_capacity_ = 0;
  std::int64_t backward_capacity_ = 0;
  std::int64_t batch_ = 0;
  bool trained_ = false;  // output_grad() was taken for the current forward
  HostBuffer forward_memory_;
  HostBuffer backward_memory_;
  std::vector<Tensor> act_;
  std::vector<Tensor> grad_;  // grad_[i] matches act_[i]; grad_[0] stays undefined
  std::vector<std::size_t> act_offset_, grad_offset_, ws_offset_;
};

}  // namespace murmur::nn
