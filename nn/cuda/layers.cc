// The device layers that need no cuDNN: Linear through cuBLAS, ReLU, GELU and Dropout as
// kernels; and the factory that maps a host layer to its twin.
#include <fmt/format.h>

#include "core/error.h"
#include "nn/activations.h"
#include "nn/cuda/check.h"
#include "nn/cuda/kernels.h"
#include "nn/cuda/layer.h"
#include "nn/dropout.h"
#include "nn/flatten.h"
#include "nn/linear.h"

namespace murmur::nn::cuda {
namespace {

// y = x W^T + b as nn::Linear. cuBLAS is column-major: a row-major [r, c] matrix is its
// column-major transpose [c, r] with leading dimension c, so each row-major product below is
// written as the product of the transposes.
class CudaLinear : public DeviceLayer {
 public:
  CudaLinear(const Linear& host, const std::string& name, const DeviceArenas& a)
      : in_(host.in_features()), out_(host.out_features()), relu_(host.fused_relu()),
        weight_(a.params.view(name + ".weight")), weight_grad_(a.grads.view(name + ".weight")),
        bias_(host.has_bias() ? a.params.view(name + ".bias") : nullptr),
        bias_grad_(host.has_bias() ? a.grads.view(name + ".bias") : nullptr) {}

  std::string kind() const override { return "Linear"; }

  void forward(Context& cx, const Tensor& in, Tensor& out, float* workspace,
               const StepContext& ctx) override {
    const int n = static_cast<int>(in.rows());
    const float one = 1.0f, zero = 0.0f;
    // Y^T [out, n] = W [out, in] (W row-major is W^T column-major: op T) * X^T [in, n].
    MURMUR_CUBLAS_CHECK(cublasSgemm(cx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, dim(out_), n, dim(in_),
                                    &one, weight_, dim(in_), in.data, dim(in_), &zero, out.data,
                                    dim(out_)));
    add_bias(out.data, bias_, n, out_, relu_, cx.stream());
  }

  void backward(Context& cx, const Tensor& in, const Tensor& out, Tensor& grad_out,
                Tensor& grad_in, float* workspace, const StepContext& ctx) override {
    const int n = static_cast<int>(in.rows());
    float* g = grad_out.data;
    // The absorbed ReLU's backward: its output is our output, so the mask is out > 0.
    if (relu_) relu_backward(g, g, out.data, n * out_, cx.stream());
    const float one = 1.0f, zero = 0.0f;
    const float beta = ctx.accumulate_grads ? 1.0f : 0.0f;
    // dW [out, in] = G^T X: column-major dW^T [in, out] = X^T [in, n] * G [n, out].
    MURMUR_CUBLAS_CHECK(cublasSgemm(cx.blas(), CUBLAS_OP_N, CUBLAS_OP_T, dim(in_), dim(out_), n,
                                    &one, in.data, dim(in_), g, dim(out_), &beta, weight_grad_,
                                    dim(in_)));
    if (bias_grad_ != nullptr)
      column_sums(bias_grad_, g, n, out_, ctx.accumulate_grads, cx.stream());
    // dX [n, in] = G W: column-major dX^T [in, n] = W^T [in, out] * G^T [out, n].
    if (grad_in.defined()) {
      MURMUR_CUBLAS_CHECK(cublasSgemm(cx.blas(), CUBLAS_OP_N, CUBLAS_OP_N, dim(in_), n, dim(out_),
                                      &one, weight_, dim(in_), g, dim(out_), &zero, grad_in.data,
                                      dim(in_)));
    }
  }

 private:
  static int dim(std::int64_t d) { return static_cast<int>(d); }

  std::int64_t in_, out_;
  bool relu_;
  float* weight_;
  float* weight_grad_;
  float* bias_;
  float* bias_grad_;
};

class CudaReLU : public DeviceLayer {
 public:
  std::string kind() const override { return "ReLU"; }
  void forward(Context& cx, const Tensor& in, Tensor& out, float* workspace,
               const StepContext& ctx) override {
    relu(out.data, in.data, in.numel(), cx.stream());
  }
  void backward(Context& cx, const Tensor& in, const Tensor& out, Tensor& grad_out,
                Tensor& grad_in, float* workspace, const StepContext& ctx) override {
    if (grad_in.defined())
      relu_backward(grad_in.data, grad_out.data, out.data, out.numel(), cx.stream());
  }
};

class CudaGELU : public DeviceLayer {
 public:
  std::string kind() const override { return "GELU"; }
  void forward(Context& cx, const Tensor& in, Tensor& out, float* workspace,
               const StepContext& ctx) override {
    gelu(out.data, in.data, in.numel(), cx.stream());
  }
  void backward(Context& cx, const Tensor& in, const Tensor& out, Tensor& grad_out,
                Tensor& grad_in, float* workspace, const StepContext& ctx) override {
    if (grad_in.defined())
      gelu_backward(grad_in.data, grad_out.data, in.data, in.numel(), cx.stream());
  }
};

// The mask comes from a hash of (a seed drawn from ctx.rng, element index), not from the host
// Rng element by element: the same seed gives the same mask, but not the CPU layer's mask.
class CudaDropout : public DeviceLayer {
 public:
  explicit CudaDropout(double p) : p_(p) {}
  std::string kind() const override { return "Dropout"; }
  std::size_t workspace_floats(const Shape& input, std::int64_t n) const override {
    return static_cast<std::size_t>(input.numel() * n);
  }
  void forward(Context& cx, const Tensor& in, Tensor& out, float* workspace,
               const StepContext& ctx) override {
    const std::int64_t n = in.numel();
    last_training_ = ctx.training && p_ > 0.0;
    if (!last_training_) {
      if (out.data != in.data)
        MURMUR_CUDA_CHECK(cudaMemcpyAsync(out.data, in.data, n * sizeof(float),
                                          cudaMemcpyDeviceToDevice, cx.stream()));
      return;
    }
    if (ctx.rng == nullptr) throw Error("Dropout: training step without an Rng");
    dropout(out.data, workspace, in.data, n, p_, ctx.rng->next_u64(), cx.stream());
  }
  void backward(Context& cx, const Tensor& in, const Tensor& out, Tensor& grad_out,
                Tensor& grad_in, float* workspace, const StepContext& ctx) override {
    if (!grad_in.defined()) return;
    const std::int64_t n = grad_out.numel();
    if (!last_training_) {
      if (grad_in.data != grad_out.data)
        MURMUR_CUDA_CHECK(cudaMemcpyAsync(grad_in.data, grad_out.data, n * sizeof(float),
                                          cudaMemcpyDeviceToDevice, cx.stream()));
      return;
    }
    multiply(grad_in.data, grad_out.data, workspace, n, cx.stream());
  }

 private:
  double p_;
  bool last_training_ = false;
};

}  // namespace

std::unique_ptr<DeviceLayer> make_device_layer(const Layer& layer, const std::string& name,
                                               const DeviceArenas& arenas) {
  if (layer.is_view()) return nullptr;
  if (auto* l = dynamic_cast<const Linear*>(&layer)) return std::make_unique<CudaLinear>(*l, name, arenas);
  if (dynamic_cast<const ReLU*>(&layer)) return std::make_unique<CudaReLU>();
  if (dynamic_cast<const GELU*>(&layer)) return std::make_unique<CudaGELU>();
  if (auto* d = dynamic_cast<const Dropout*>(&layer)) return std::make_unique<CudaDropout>(d->p());
  if (auto cudnn = make_cudnn_layer(layer, name, arenas)) return cudnn;
  throw Error(fmt::format("nn/cuda: layer {} ('{}') has no CUDA version", layer.kind(), name));
}

}  // namespace murmur::nn::cuda
