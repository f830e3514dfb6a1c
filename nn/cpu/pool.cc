#include "nn/cpu/pool.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::nn::cpu {

std::size_t PoolGeometry::in_size() const {
  return static_cast<std::size_t>(planes) * in_h * in_w;
}

std::size_t PoolGeometry::out_size() const {
  return static_cast<std::size_t>(planes) * out_h() * out_w();
}

void PoolGeometry::validate() const {
  if (planes <= 0 || in_h <= 0 || in_w <= 0 || kernel_h <= 0 || kernel_w <= 0 || stride_h <= 0 ||
      stride_w <= 0) {
    throw ConfigError(fmt::format(
        "pool2d: sizes must be positive (planes {}, input {}x{}, kernel {}x{}, stride {}x{})",
        planes, in_h, in_w, kernel_h, kernel_w, stride_h, stride_w));
  }
  if (pad_h < 0 || pad_w < 0 || 2 * pad_h > kernel_h || 2 * pad_w > kernel_w) {
    throw ConfigError(fmt::format("pool2d: padding {}x{} must be >= 0 and at most half of kernel {}x{}",
                                  pad_h, pad_w, kernel_h, kernel_w));
  }
  if (in_h + 2 * pad_h < kernel_h || in_w + 2 * pad_w < kernel_w) {
    throw ConfigError(fmt::format("pool2d: kernel {}x{} does not fit input {}x{} padded by {}x{}",
                                  kernel_h, kernel_w, in_h, in_w, pad_h, pad_w));
  }
}

void maxpool2d_forward(const PoolGeometry& g, const float* x, float* y, float* argmax) {
  const int oh_n = g.out_h(), ow_n = g.out_w();
  const std::size_t plane = static_cast<std::size_t>(g.in_h) * g.in_w;
  for (int p = 0; p < g.planes; ++p) {
    const float* xp = x + p * plane;
    for (int oh = 0; oh < oh_n; ++oh) {
      const int h0 = std::max(oh * g.stride_h - g.pad_h, 0);
      const int h1 = std::min(oh * g.stride_h - g.pad_h + g.kernel_h, g.in_h);
      for (int ow = 0; ow < ow_n; ++ow, ++y, ++argmax) {
        const int w0 = std::max(ow * g.stride_w - g.pad_w, 0);
        const int w1 = std::min(ow * g.stride_w - g.pad_w + g.kernel_w, g.in_w);
        float best = -std::numeric_limits<float>::infinity();
        int best_at = h0 * g.in_w + w0;
        for (int h = h0; h < h1; ++h) {
          for (int w = w0; w < w1; ++w) {
            const float v = xp[h * g.in_w + w];
            // `!(v <= best)` also takes a NaN, which then propagates as in PyTorch.
            if (!(v <= best)) {
              best = v;
              best_at = h * g.in_w + w;
            }
          }
        }
        *y = best;
        *argmax = static_cast<float>(best_at);
      }
    }
  }
}

void maxpool2d_backward(const PoolGeometry& g, const float* dy, const float* argmax, float* dx) {
  std::fill(dx, dx + g.in_size(), 0.0f);
  const std::size_t plane = static_cast<std::size_t>(g.in_h) * g.in_w;
  const std::size_t out_plane = static_cast<std::size_t>(g.out_h()) * g.out_w();
  for (int p = 0; p < g.planes; ++p) {
    float* dxp = dx + p * plane;
    for (std::size_t i = 0; i < out_plane; ++i) {
      dxp[static_cast<std::size_t>(*argmax++)] += *dy++;
    }
  }
}

void avgpool2d_forward(const PoolGeometry& g, const float* x, float* y) {
  const int oh_n = g.out_h(), ow_n = g.out_w();
  const std::size_t plane = static_cast<std::size_t>(g.in_h) * g.in_w;
  const float scale = 1.0f / static_cast<float>(g.kernel_h * g.kernel_w);
  for (int p = 0; p < g.planes; ++p) {
    const float* xp = x + p * plane;
    for (int oh = 0; oh < oh_n; ++oh) {
      const int h0 = std::max(oh * g.stride_h - g.pad_h, 0);
      const int h1 = std::min(oh * g.stride_h - g.pad_h + g.kernel_h, g.in_h);
      for (int ow = 0; ow < ow_n; ++ow) {
        const int w0 = std::max(ow * g.stride_w - g.pad_w, 0);
        const int w1 = std::min(ow * g.stride_w - g.pad_w + g.kernel_w, g.in_w);
        float sum = 0.0f;
        for (int h = h0; h < h1; ++h) {
          for (int w = w0; w < w1; ++w) sum += xp[h * g.in_w + w];
        }
        *y++ = sum * scale;
      }
    }
  }
}

void avgpool2d_backward(const PoolGeometry& g, const float* dy, float* dx) {
  std::fill(dx, dx + g.in_size(), 0.0f);
  const int oh_n = g.out_h(), ow_n = g.out_w();
  const std::size_t plane = static_cast<std::size_t>(g.in_h) * g.in_w;
  const float scale = 1.0f / static_cast<float>(g.kernel_h * g.kernel_w);
  for (int p = 0; p < g.planes; ++p) {
    float* dxp = dx + p * plane;
    for (int oh = 0; oh < oh_n; ++oh) {
      const int h0 = std::max(oh * g.stride_h - g.pad_h, 0);
      const int h1 = std::min(oh * g.stride_h - g.pad_h + g.kernel_h, g.in_h);
      for (int ow = 0; ow < ow_n; ++ow) {
        const int w0 = std::max(ow * g.stride_w - g.pad_w, 0);
        const int w1 = std::min(ow * g.stride_w - g.pad_w + g.kernel_w, g.in_w);
        const float d = *dy++ * scale;
        for (int h = h0; h < h1; ++h) {
          for (int w = w0; w < w1; ++w) dxp[h * g.in_w + w] += d;
        }
      }
    }
  }
}

}  // namespace murmur::nn::cpu
