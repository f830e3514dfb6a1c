#include "nn/cpu/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "nn/cpu/threads.h"

namespace murmur::nn::cpu {

std::size_t PoolGeometry::in_size() const { return static_cast<std::size_t>(planes) * in_h * in_w; }

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
    throw ConfigError(
        fmt::format("pool2d: padding {}x{} must be >= 0 and at most half of kernel {}x{}", pad_h,
                    pad_w, kernel_h, kernel_w));
  }
  if (in_h + 2 * pad_h < kernel_h || in_w + 2 * pad_w < kernel_w) {
    throw ConfigError(fmt::format("pool2d: kernel {}x{} does not fit input {}x{} padded by {}x{}",
                                  kernel_h, kernel_w, in_h, in_w, pad_h, pad_w));
  }
}

namespace {

// PyTorch's rule: a value replaces the maximum if greater, or if NaN (which then stays).
inline bool takes(float v, float best) { return v > best || std::isnan(v); }

// The CNN's 2x2 / stride 2 / unpadded case: no window clipping, and the same rule written as
// selects. no-trapping-math lets g++ turn them into vector blends; as branches they are coin
// flips after a ReLU (ties at 0, random order), which measured 3-5x slower.
__attribute__((optimize("no-trapping-math"))) void maxpool2x2(const PoolGeometry& g,
                                                              std::int64_t p_begin,
                                                              std::int64_t p_end, const float* x,
                                                              float* y, float* argmax) {
  const int oh_n = g.out_h(), ow_n = g.out_w(), w = g.in_w;
  const std::size_t plane = static_cast<std::size_t>(g.in_h) * w;
  const std::size_t out_plane = static_cast<std::size_t>(oh_n) * ow_n;
  for (std::int64_t p = p_begin; p < p_end; ++p) {
    const float* xp = x + p * plane;
    float* yp = y + p * out_plane;
    float* ap = argmax + p * out_plane;
    for (int oh = 0; oh < oh_n; ++oh) {
      const float* r0 = xp + 2 * oh * w;
      const float* r1 = r0 + w;
      for (int ow = 0; ow < ow_n; ++ow) {
        const float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
        const float at = static_cast<float>(2 * oh * w + 2 * ow);
        const bool tb = b > a || b != b;
        float best = tb ? b : a;
        float best_at = tb ? at + 1 : at;
        const bool tc = c > best || c != c;
        best = tc ? c : best;
        best_at = tc ? at + w : best_at;
        const bool td = d > best || d != d;
        yp[oh * ow_n + ow] = td ? d : best;
        ap[oh * ow_n + ow] = td ? at + w + 1 : best_at;
      }
    }
  }
}

}  // namespace

void maxpool2d_forward(const PoolGeometry& g, const float* x, float* y, float* argmax) {
  const int oh_n = g.out_h(), ow_n = g.out_w();
  const std::size_t plane = static_cast<std::size_t>(g.in_h) * g.in_w;
  const std::size_t out_plane = static_cast<std::size_t>(oh_n) * ow_n;
  // Planes are independent: the compute threads split them.
  if (g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 0 &&
      g.pad_w == 0) {
    parallel_for(g.planes, 16, [&](std::int64_t p_begin, std::int64_t p_end) {
      maxpool2x2(g, p_begin, p_end, x, y, argmax);
    });
    return;
  }
  parallel_for(g.planes, 16, [&](std::int64_t p_begin, std::int64_t p_end) {
    for (std::int64_t p = p_begin; p < p_end; ++p) {
      const float* xp = x + p * plane;
      float* yp = y + p * out_plane;
      float* ap = argmax + p * out_plane;
      for (int oh = 0; oh < oh_n; ++oh) {
        const int h0 = std::max(oh * g.stride_h - g.pad_h, 0);
        const int h1 = std::min(oh * g.stride_h - g.pad_h + g.kernel_h, g.in_h);
        for (int ow = 0; ow < ow_n; ++ow, ++yp, ++ap) {
          const int w0 = std::max(ow * g.stride_w - g.pad_w, 0);
          const int w1 = std::min(ow * g.stride_w - g.pad_w + g.kernel_w, g.in_w);
          float best = -std::numeric_limits<float>::infinity();
          int best_at = h0 * g.in_w + w0;
          for (int h = h0; h < h1; ++h) {
            for (int w = w0; w < w1; ++w) {
              const float v = xp[h * g.in_w + w];
              if (takes(v, best)) {
                best = v;
                best_at = h * g.in_w + w;
              }
            }
          }
          *yp = best;
          *ap = static_cast<float>(best_at);
        }
      }
    }
  });
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
