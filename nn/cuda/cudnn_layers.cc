// The device layers through cuDNN's (v9, legacy but still shipped) convolution, pooling and
// batch-norm calls: Conv2d, MaxPool2d, AvgPool2d, BatchNorm2d. Descriptors are set per batch
// size; convolution algorithms are measured once per batch size (cudnnFind*) and restricted
// to FMA math (no TF32), so results match the CPU path to float rounding.
#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "nn/batchnorm.h"
#include "nn/conv2d.h"
#include "nn/cuda/check.h"
#include "nn/cuda/kernels.h"
#include "nn/cuda/layer.h"
#include "nn/pool.h"

namespace murmur::nn::cuda {
namespace {

// RAII for the descriptor kinds, created at construction.
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { MURMUR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  void set(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
    MURMUR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                  static_cast<int>(n), static_cast<int>(c),
                                                  static_cast<int>(h), static_cast<int>(w)));
  }
};
struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() { MURMUR_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d)); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};
struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() { MURMUR_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d)); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};
struct PoolDesc {
  cudnnPoolingDescriptor_t d = nullptr;
  PoolDesc() { MURMUR_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d)); }
  ~PoolDesc() { cudnnDestroyPoolingDescriptor(d); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
};

// The fastest measured algorithm that ran, uses FMA (not tensor-op) math and fits 1 GiB of
// workspace; `fallback` (supported for every geometry, no or little workspace) otherwise.
template <class Perf, class Algo>
Algo pick(const Perf* perf, int count, Algo fallback) {
  constexpr std::size_t kMaxWorkspace = std::size_t{1} << 30;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace &&
        (perf[i].mathType == CUDNN_FMA_MATH || perf[i].mathType == CUDNN_DEFAULT_MATH))
      return perf[i].algo;
  }
  return fallback;
}

class CudaConv2d : public DeviceLayer {
 public:
  CudaConv2d(const Conv2d& host, const std::string& name, const DeviceArenas& a)
      : in_(host.in_channels()), out_(host.out_channels()), opt_(host.options()),
        relu_(host.fused_relu()), weight_(a.params.view(name + ".weight")),
        weight_grad_(a.grads.view(name + ".weight")),
        bias_(opt_.bias ? a.params.view(name + ".bias") : nullptr),
        bias_grad_(opt_.bias ? a.grads.view(name + ".bias") : nullptr), name_(name) {
    MURMUR_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_desc_.d, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                  static_cast<int>(out_), static_cast<int>(in_),
                                                  opt_.kernel_h, opt_.kernel_w));
    MURMUR_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_desc_.d, opt_.pad_h, opt_.pad_w,
                                                       opt_.stride_h, opt_.stride_w, 1, 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    MURMUR_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_.d, CUDNN_FMA_MATH));
  }

  std::string kind() const override { return "Conv2d"; }

  void forward(Context& cx, const Tensor& in, Tensor& out, float* workspace,
               const StepContext& ctx) override {
    setup(cx, in, out);
    const float one = 1.0f, zero = 0.0f;
    MURMUR_CUDNN_CHECK(cudnnConvolutionForward(cx.dnn(), &one, x_desc_.d, in.data, w_desc_.d,
                                               weight_, conv_desc_.d, fwd_, cx.scratch(ws_bytes_),
                                               ws_bytes_, &zero, y_desc_.d, out.data));
    add_channel_bias(out.data, bias_, out.dim(0), out_, out.dim(2) * out.dim(3), relu_,
                     cx.stream());
  }

  void backward(Context& cx, const Tensor& in, const Tensor& out, Tensor& grad_out,
                Tensor& grad_in, float* workspace, const StepContext& ctx) override {
    setup(cx, in, out);
    float* g = grad_out.data;
    if (relu_) relu_backward(g, g, out.data, out.numel(), cx.stream());
    const float one = 1.0f, zero = 0.0f;
    const float beta = ctx.accumulate_grads ? 1.0f : 0.0f;
    void* ws = cx.scratch(ws_bytes_);
    MURMUR_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cx.dnn(), &one, x_desc_.d, in.data,
                                                      y_desc_.d, g, conv_desc_.d, bwd_filter_, ws,
                                                      ws_bytes_, &beta, w_desc_.d, weight_grad_));
    if (bias_grad_ != nullptr) {
      channel_sums(bias_grad_, g, out.dim(0), out_, out.dim(2) * out.dim(3),
                   ctx.accumulate_grads, cx.stream());
    }
    if (grad_in.defined()) {
      MURMUR_CUDNN_CHECK(cudnnConvolutionBackwardData(cx.dnn(), &one, w_desc_.d, weight_,
                                                      y_desc_.d, g, conv_desc_.d, bwd_data_, ws,
                                                      ws_bytes_, &zero, x_desc_.d, grad_in.data));
    }
  }

 private:
  // Descriptors and algorithms for this batch size (measured on its first use).
  void setup(Context& cx, const Tensor& in, const Tensor& out) {
    const std::int64_t n = in.dim(0);
    if (n == batch_) return;
    x_desc_.set(n, in_, in.dim(2), in.dim(3));
    y_desc_.set(n, out_, out.dim(2), out.dim(3));
    int dims[4] = {0, 0, 0, 0};
    MURMUR_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv_desc_.d, x_desc_.d, w_desc_.d,
                                                             &dims[0], &dims[1], &dims[2],
                                                             &dims[3]));
    if (dims[0] != n || dims[1] != out_ || dims[2] != out.dim(2) || dims[3] != out.dim(3)) {
      throw Error(fmt::format("Conv2d '{}': cuDNN output [{}, {}, {}, {}] differs from {}", name_,
                              dims[0], dims[1], dims[2], dims[3], out.shape.str()));
    }
    constexpr int kAlgos = 8;
    int count = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[kAlgos];
    MURMUR_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(
        cx.dnn(), x_desc_.d, w_desc_.d, conv_desc_.d, y_desc_.d, kAlgos, &count, fwd));
    fwd_ = pick(fwd, count, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
    cudnnConvolutionBwdFilterAlgoPerf_t filter[kAlgos];
    MURMUR_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(
        cx.dnn(), x_desc_.d, y_desc_.d, conv_desc_.d, w_desc_.d, kAlgos, &count, filter));
    bwd_filter_ = pick(filter, count, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0);
    cudnnConvolutionBwdDataAlgoPerf_t data[kAlgos];
    MURMUR_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(
        cx.dnn(), w_desc_.d, y_desc_.d, conv_desc_.d, x_desc_.d, kAlgos, &count, data));
    bwd_data_ = pick(data, count, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0);
    std::size_t a = 0, b = 0, c = 0;
    MURMUR_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
        cx.dnn(), x_desc_.d, w_desc_.d, conv_desc_.d, y_desc_.d, fwd_, &a));
    MURMUR_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        cx.dnn(), x_desc_.d, y_desc_.d, conv_desc_.d, w_desc_.d, bwd_filter_, &b));
    MURMUR_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
        cx.dnn(), w_desc_.d, y_desc_.d, conv_desc_.d, x_desc_.d, bwd_data_, &c));
    ws_bytes_ = std::max({a, b, c, std::size_t{256}});
    batch_ = n;
    log().debug("cuda: {} batch {}: forward algo {}, filter algo {}, data algo {}, {} KiB scratch",
                name_, n, static_cast<int>(fwd_), static_cast<int>(bwd_filter_),
                static_cast<int>(bwd_data_), ws_bytes_ >> 10);
  }

  std::int64_t in_, out_;
  Conv2dOptions opt_;
  bool relu_;
  float* weight_;
  float* weight_grad_;
  float* bias_;
  float* bias_grad_;
  std::string name_;
  TensorDesc x_desc_, y_desc_;
  FilterDesc w_desc_;
  ConvDesc conv_desc_;
  std::int64_t batch_ = 0;
  cudnnConvolutionFwdAlgo_t fwd_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_ = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
  cudnnConvolutionBwdDataAlgo_t bwd_data_ = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  std::size_t ws_bytes_ = 0;
};

// MaxPool2d (max, NaN propagated as torch) and AvgPool2d (padding counted, as torch's
// count_include_pad=True); floor mode output sizes, as the CPU layers.
class CudaPool2d : public DeviceLayer {
 public:
  CudaPool2d(const PoolOptions& o, bool max) : max_(max) {
    MURMUR_CUDNN_CHECK(cudnnSetPooling2dDescriptor(
        desc_.d, max ? CUDNN_POOLING_MAX : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
        CUDNN_PROPAGATE_NAN, o.kernel_h, o.kernel_w, o.pad_h, o.pad_w, o.stride_h, o.stride_w));
  }
  std::string kind() const override { return max_ ? "MaxPool2d" : "AvgPool2d"; }

  void forward(Context& cx, const Tensor& in, Tensor& out, float* workspace,
               const StepContext& ctx) override {
    setup(in, out);
    const float one = 1.0f, zero = 0.0f;
    MURMUR_CUDNN_CHECK(cudnnPoolingForward(cx.dnn(), desc_.d, &one, x_desc_.d, in.data, &zero,
                                           y_desc_.d, out.data));
  }

  void backward(Context& cx, const Tensor& in, const Tensor& out, Tensor& grad_out,
                Tensor& grad_in, float* workspace, const StepContext& ctx) override {
    if (!grad_in.defined()) return;
    setup(in, out);
    const float one = 1.0f, zero = 0.0f;
    MURMUR_CUDNN_CHECK(cudnnPoolingBackward(cx.dnn(), desc_.d, &one, y_desc_.d, out.data,
                                            y_desc_.d, grad_out.data, x_desc_.d, in.data, &zero,
                                            x_desc_.d, grad_in.data));
  }

 private:
  void setup(const Tensor& in, const Tensor& out) {
    if (in.dim(0) == batch_) return;
    x_desc_.set(in.dim(0), in.dim(1), in.dim(2), in.dim(3));
    y_desc_.set(out.dim(0), out.dim(1), out.dim(2), out.dim(3));
    batch_ = in.dim(0);
  }

  bool max_;
  PoolDesc desc_;
  TensorDesc x_desc_, y_desc_;
  std::int64_t batch_ = 0;
};

// BatchNorm2d, spatial mode. The workspace keeps cuDNN's saved mean and inverse std for
// backward. Backward is written for training mode only (Model::train_batch trains).
class CudaBatchNorm2d : public DeviceLayer {
 public:
  CudaBatchNorm2d(const BatchNorm2d& host, const std::string& name, const DeviceArenas& a)
      : channels_(host.channels()), eps_(host.eps()), momentum_(host.momentum()),
        weight_(a.params.view(name + ".weight")), bias_(a.params.view(name + ".bias")),
        weight_grad_(a.grads.view(name + ".weight")), bias_grad_(a.grads.view(name + ".bias")),
        running_mean_(a.buffers.view(name + ".running_mean")),
        running_var_(a.buffers.view(name + ".running_var")),
        batches_(a.buffers.view(name + ".num_batches_tracked")) {
    stats_desc_.set(1, channels_, 1, 1);
  }
  std::string kind() const override { return "BatchNorm2d"; }
  std::size_t workspace_floats(const Shape& input, std::int64_t n) const override {
    return 2 * static_cast<std::size_t>(channels_);
  }

  void forward(Context& cx, const Tensor& in, Tensor& out, float* workspace,
               const StepContext& ctx) override {
    setup(in);
    const float one = 1.0f, zero = 0.0f;
    last_training_ = ctx.training;
    if (ctx.training) {
      if (in.dim(0) * in.dim(2) * in.dim(3) < 2)
        throw Error(fmt::format("BatchNorm2d: training needs more than 1 value per channel, got "
                                "input {}", in.shape.str()));
      // cuDNN's running variance uses the unbiased batch variance, as torch does.
      MURMUR_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
          cx.dnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, x_desc_.d, in.data, x_desc_.d, out.data,
          stats_desc_.d, weight_, bias_, momentum_, running_mean_, running_var_, eps_, workspace,
          workspace + channels_));
      add_scalar(batches_, 1.0f, cx.stream());
    } else {
      MURMUR_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
          cx.dnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, x_desc_.d, in.data, x_desc_.d, out.data,
          stats_desc_.d, weight_, bias_, running_mean_, running_var_, eps_));
    }
  }

  void backward(Context& cx, const Tensor& in, const Tensor& out, Tensor& grad_out,
                Tensor& grad_in, float* workspace, const StepContext& ctx) override {
    if (!last_training_)
      throw Error("BatchNorm2d on CUDA: backward after an evaluation-mode forward is not supported");
    setup(in);
    const float one = 1.0f, zero = 0.0f;
    const float beta = ctx.accumulate_grads ? 1.0f : 0.0f;
    // cuDNN always writes dx: without a grad_in (the first layer) it goes to scratch.
    float* dx = grad_in.defined()
                    ? grad_in.data
                    : static_cast<float*>(cx.scratch(in.numel() * sizeof(float)));
    MURMUR_CUDNN_CHECK(cudnnBatchNormalizationBackward(
        cx.dnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &beta, x_desc_.d, in.data,
        x_desc_.d, grad_out.data, x_desc_.d, dx, stats_desc_.d, weight_, weight_grad_, bias_grad_,
        eps_, workspace, workspace + channels_));
  }

 private:
  void setup(const Tensor& in) {
    if (in.dim(0) == batch_) return;
    x_desc_.set(in.dim(0), in.dim(1), in.dim(2), in.dim(3));
    batch_ = in.dim(0);
  }

  std::int64_t channels_;
  double eps_, momentum_;
  float* weight_;
  float* bias_;
  float* weight_grad_;
  float* bias_grad_;
  float* running_mean_;
  float* running_var_;
  float* batches_;
  TensorDesc x_desc_, stats_desc_;
  std::int64_t batch_ = 0;
  bool last_training_ = false;
};

}  // namespace

std::unique_ptr<DeviceLayer> make_cudnn_layer(const Layer& layer, const std::string& name,
                                              const DeviceArenas& arenas) {
  if (auto* c = dynamic_cast<const Conv2d*>(&layer)) return std::make_unique<CudaConv2d>(*c, name, arenas);
  if (auto* p = dynamic_cast<const MaxPool2d*>(&layer))
    return std::make_unique<CudaPool2d>(p->options(), /*max=*/true);
  if (auto* p = dynamic_cast<const AvgPool2d*>(&layer))
    return std::make_unique<CudaPool2d>(p->options(), /*max=*/false);
  if (auto* b = dynamic_cast<const BatchNorm2d*>(&layer))
    return std::make_unique<CudaBatchNorm2d>(*b, name, arenas);
  return nullptr;
}

}  // namespace murmur::nn::cuda
