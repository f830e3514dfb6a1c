#include "nn/cpu/conv.h"

#include <algorithm>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "nn/cpu/blas.h"
#include "nn/cpu/im2col.h"

// Why im2col + GEMM: at the CNN's shapes (batch 64; 1x28x28 -> 32x24x24 and 32x12x12 ->
// 64x8x8, both 5x5) one sgemm over the columns of the whole batch runs OpenBLAS's kernel near
// its peak, and the unfolding costs a few percent of it. A direct loop nest (vectorized over
// the output row) measured 5.1 ms against 1.0 ms (conv1 forward) and 70 ms against 6.4 ms
// (conv2 forward) on one thread here. Chunks of 1, 5, 20 or 64 samples per GEMM were within
// noise of each other, so the budget only bounds the workspace.

namespace murmur::nn::cpu {
namespace {

// Columns of at most this many floats per GEMM (16 MiB): whole batches of the CNN fit, and
// a large image or batch is split instead of asking for an unbounded workspace.
constexpr std::size_t kColumnBudget = std::size_t{4} << 20;

std::size_t out_plane(const ConvGeometry& g) {
  return static_cast<std::size_t>(g.out_h()) * g.out_w();
}

}  // namespace

std::size_t ConvGeometry::in_size() const {
  return static_cast<std::size_t>(batch) * in_channels * in_h * in_w;
}

std::size_t ConvGeometry::out_size() const {
  return static_cast<std::size_t>(batch) * out_channels * out_plane(*this);
}

void ConvGeometry::validate() const {
  auto need = [](bool ok, const char* what, int v) {
    if (!ok) throw ConfigError(fmt::format("conv2d: {} must be positive, got {}", what, v));
  };
  need(batch > 0, "batch", batch);
  need(in_channels > 0, "in_channels", in_channels);
  need(in_h > 0, "input height", in_h);
  need(in_w > 0, "input width", in_w);
  need(out_channels > 0, "out_channels", out_channels);
  need(kernel_h > 0, "kernel height", kernel_h);
  need(kernel_w > 0, "kernel width", kernel_w);
  need(stride_h > 0, "stride height", stride_h);
  need(stride_w > 0, "stride width", stride_w);
  if (pad_h < 0 || pad_w < 0) {
    throw ConfigError(fmt::format("conv2d: padding must be >= 0, got {}x{}", pad_h, pad_w));
  }
  if (in_h + 2 * pad_h < kernel_h || in_w + 2 * pad_w < kernel_w) {
    throw ConfigError(fmt::format("conv2d: kernel {}x{} does not fit input {}x{} padded by {}x{}",
                                  kernel_h, kernel_w, in_h, in_w, pad_h, pad_w));
  }
}

int conv2d_chunk(const ConvGeometry& g) {
  const std::size_t per_sample = static_cast<std::size_t>(g.patch()) * out_plane(g);
  const std::size_t fit =
      std::max<std::size_t>(1, kColumnBudget / std::max<std::size_t>(1, per_sample));
  return static_cast<int>(std::min<std::size_t>(fit, static_cast<std::size_t>(g.batch)));
}

std::size_t conv2d_workspace_floats(const ConvGeometry& g) {
  const std::size_t cols = out_plane(g) * conv2d_chunk(g);
  // The column matrix, then the output (or output gradient) of the chunk as [OC][count*OHW].
  return cols * g.patch() + cols * g.out_channels;
}

void conv2d_forward(const ConvGeometry& g, const float* x, const float* weight, const float* bias,
                    float* y, float* workspace, bool relu) {
  const int chunk = conv2d_chunk(g);
  const std::size_t plane = out_plane(g);
  const int k = g.patch(), oc_n = g.out_channels;
  float* col = workspace;
  float* yt = workspace + plane * chunk * k;
  for (int first = 0; first < g.batch; first += chunk) {
    const int count = std::min(chunk, g.batch - first);
    const int cols = static_cast<int>(plane) * count;
    im2col(g, x, first, count, col);
    // With one sample the GEMM's [OC][OHW] result is already that sample's NCHW slab.
    float* out = count == 1 ? y + first * oc_n * plane : yt;
    gemm(false, false, oc_n, cols, k, 1.0f, weight, k, col, cols, 0.0f, out, cols);
    for (int n = 0; n < count; ++n) {
      for (int oc = 0; oc < oc_n; ++oc) {
        float* dst = y + ((static_cast<std::size_t>(first + n)) * oc_n + oc) * plane;
        const float* src = out + static_cast<std::size_t>(oc) * cols + n * plane;
        const float b = bias ? bias[oc] : 0.0f;
        if (relu) {
          for (std::size_t i = 0; i < plane; ++i) dst[i] = std::max(src[i] + b, 0.0f);
        } else {
          for (std::size_t i = 0; i < plane; ++i) dst[i] = src[i] + b;
        }
      }
    }
  }
}

void conv2d_backward(const ConvGeometry& g, const float* x, const float* weight, const float* dy,
                     float* dx, float* dweight, float* dbias, float* workspace,
                     ConvBackwardOptions options) {
  const int chunk = conv2d_chunk(g);
  const std::size_t plane = out_plane(g);
  const int k = g.patch(), oc_n = g.out_channels;
  float* col = workspace;
  float* dyt = workspace + plane * chunk * k;
  if (dx) std::fill(dx, dx + g.in_size(), 0.0f);
  for (int first = 0; first < g.batch; first += chunk) {
    const int count = std::min(chunk, g.batch - first);
    const int cols = static_cast<int>(plane) * count;
    const float* dyc = dy + static_cast<std::size_t>(first) * oc_n * plane;
    if (count > 1) {  // gather the chunk's gradient as [OC][count*OHW], the GEMM's layout
      for (int n = 0; n < count; ++n) {
        for (int oc = 0; oc < oc_n; ++oc) {
          std::memcpy(dyt + static_cast<std::size_t>(oc) * cols + n * plane,
                      dyc + (static_cast<std::size_t>(n) * oc_n + oc) * plane,
                      sizeof(float) * plane);
        }
      }
      dyc = dyt;
    }
    // The first chunk overwrites the parameter gradients unless asked to accumulate.
    const bool add = options.accumulate || first > 0;
    if (dbias) {
      for (int oc = 0; oc < oc_n; ++oc) {
        const float* row = dyc + static_cast<std::size_t>(oc) * cols;
        float s = 0.0f;
        for (int i = 0; i < cols; ++i) s += row[i];
        dbias[oc] = (add ? dbias[oc] : 0.0f) + s;
      }
    }
    if (!(options.columns_cached && count == g.batch)) im2col(g, x, first, count, col);
    // dW[OC][K] (+)= dY[OC][cols] * col^T
    gemm(false, true, oc_n, k, cols, 1.0f, dyc, cols, col, cols, add ? 1.0f : 0.0f, dweight, k);
    if (dx) {
      // dcol[K][cols] = W^T * dY, reusing the column buffer, then fold back onto dx.
      gemm(true, false, k, cols, oc_n, 1.0f, weight, k, dyc, cols, 0.0f, col, cols);
      col2im(g, col, first, count, dx);
    }
  }
}

}  // namespace murmur::nn::cpu
