// 2-D max and average pooling kernels on raw float pointers, NCHW, batch first, with PyTorch's
// semantics (floor output size; max pads with -inf, average counts padding as zeros and
// divides by the full window, count_include_pad=True). Caller-owned buffers; thread-compatible.
#pragma once

#include <cstddef>

namespace murmur::nn::cpu {

// The shape of one pooling over a batch; planes = batch * channels (pooling is per plane).
struct PoolGeometry {
  int planes = 0;
  int in_h = 0, in_w = 0;
  int kernel_h = 0, kernel_w = 0;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;

  int out_h() const { return (in_h + 2 * pad_h - kernel_h) / stride_h + 1; }
  int out_w() const { return (in_w + 2 * pad_w - kernel_w) / stride_w + 1; }
  std::size_t in_size() const;
  std::size_t out_size() const;
  // Throws ConfigError if a size or stride is non-positive, padding is negative or more than
  // half the kernel (PyTorch's rule), or the window does not fit the padded input.
  void validate() const;
};

// y = max over each window. argmax (out_size() floats) receives, per output, the index within
// its input plane of the first maximum, stored as a float (exact below 2^24 elements).
void maxpool2d_forward(const PoolGeometry& g, const float* x, float* y, float* argmax);
// dx = 0, then each dy added at its argmax (ties go to the first maximum, as in PyTorch).
void maxpool2d_backward(const PoolGeometry& g, const float* dy, const float* argmax, float* dx);

// y = mean over each window (padding counted as zeros).
void avgpool2d_forward(const PoolGeometry& g, const float* x, float* y);
// dx = 0, then each dy spread evenly over its window.
void avgpool2d_backward(const PoolGeometry& g, const float* dy, float* dx);

}  // namespace murmur::nn::cpu
