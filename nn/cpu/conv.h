// 2-D convolution kernels on raw float pointers, NCHW, batch first, weight [OC][IC][KH][KW]
// (PyTorch's layout). Lowered to im2col + one OpenBLAS sgemm per chunk of samples (faster here
// than a direct loop nest at the CNN's shapes; see conv.cc). Callers own every buffer,
// including the workspace sized by conv2d_workspace_floats(), so a step allocates nothing.
// Thread-compatible; the GEMMs use OpenBLAS's thread setting (nn/cpu/threads.h).
#pragma once

#include <cstddef>

namespace murmur::nn::cpu {

// The shape of one convolution over a batch. Kernel sizes, strides and paddings are free.
struct ConvGeometry {
  int batch = 0;
  int in_channels = 0, in_h = 0, in_w = 0;
  int out_channels = 0;
  int kernel_h = 0, kernel_w = 0;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;

  int out_h() const { return (in_h + 2 * pad_h - kernel_h) / stride_h + 1; }
  int out_w() const { return (in_w + 2 * pad_w - kernel_w) / stride_w + 1; }
  // Rows of the im2col matrix: in_channels * kernel_h * kernel_w.
  int patch() const { return in_channels * kernel_h * kernel_w; }
  std::size_t in_size() const;   // floats in x: batch * in_channels * in_h * in_w
  std::size_t out_size() const;  // floats in y: batch * out_channels * out_h * out_w

  // Throws ConfigError naming the bad field if any size is non-positive, a padding is
  // negative, or the kernel does not fit the padded input.
  void validate() const;
};

// Samples per GEMM: the whole batch when its columns fit a fixed budget, fewer otherwise.
int conv2d_chunk(const ConvGeometry& g);

// Floats of scratch that conv2d_forward and conv2d_backward need for this geometry.
std::size_t conv2d_workspace_floats(const ConvGeometry& g);

// y = conv(x, weight) + bias, then max(y, 0) if `relu`. bias may be null. workspace holds
// conv2d_workspace_floats(g); when conv2d_chunk(g) == g.batch it keeps the batch's im2col
// columns afterwards, which conv2d_backward can reuse (ConvBackwardOptions::columns_cached).
void conv2d_forward(const ConvGeometry& g, const float* x, const float* weight, const float* bias,
                    float* y, float* workspace, bool relu = false);

struct ConvBackwardOptions {
  bool accumulate = false;      // add into dweight/dbias instead of overwriting them
  bool columns_cached = false;  // workspace still holds what conv2d_forward left for this x
};

// Given dy = dL/dy: writes dL/dx into dx unless dx is null, and writes (or adds) dL/dweight
// into dweight and dL/dbias into dbias (dbias may be null). workspace as for forward.
void conv2d_backward(const ConvGeometry& g, const float* x, const float* weight, const float* dy,
                     float* dx, float* dweight, float* dbias, float* workspace,
                     ConvBackwardOptions options = {});

}  // namespace murmur::nn::cpu
