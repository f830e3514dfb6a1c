#include "nn/activations.h"

#include "nn/cpu/elementwise.h"

namespace murmur::nn {

void ReLU::forward(const Tensor& in, Tensor& out, std::span<float> workspace,
                   const StepContext& ctx) {
  cpu::relu(out.data, in.data, in.numel());
}

void ReLU::backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                    std::span<float> workspace, const StepContext& ctx) {
  // torch: grad is 0 where the output is 0 (input <= 0), including at exactly 0.
  if (grad_in.defined()) cpu::relu_backward(grad_in.data, grad_out.data, out.data, out.numel());
}

void GELU::forward(const Tensor& in, Tensor& out, std::span<float> workspace,
                   const StepContext& ctx) {
  cpu::gelu(out.data, in.data, in.numel());
}

void GELU::backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                    std::span<float> workspace, const StepContext& ctx) {
  if (grad_in.defined()) cpu::gelu_backward(grad_in.data, grad_out.data, in.data, in.numel());
}

}  // namespace murmur::nn
