#include "nn/flatten.h"

#include <cstring>

namespace murmur::nn {

// Inside Sequential these never run (is_view); they copy so the layer also works standalone.
void Flatten::forward(const Tensor& in, Tensor& out, std::span<float> workspace,
                      const StepContext& ctx) {
  if (out.data != in.data) std::memcpy(out.data, in.data, in.numel() * sizeof(float));
}

void Flatten::backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                       std::span<float> workspace, const StepContext& ctx) {
  if (grad_in.defined() && grad_in.data != grad_out.data)
    std::memcpy(grad_in.data, grad_out.data, grad_out.numel() * sizeof(float));
}

}  // namespace murmur::nn
