#include "nn/cpu/im2col.h"

#include <algorithm>
#include <cstring>

#include "nn/cpu/threads.h"

namespace murmur::nn::cpu {
namespace {

// The output columns [lo, hi) whose input column ow*stride + offset lies inside [0, width);
// the rest read padding. Hoisting this out of the inner loop is what lets the unit-stride
// case become a plain memcpy / vectorized add.
struct ValidRange {
  int lo, hi;
};
ValidRange valid_range(int out_w, int width, int stride, int offset) {
  int lo = 0;
  while (lo < out_w && lo * stride + offset < 0) ++lo;
  int hi = out_w;
  while (hi > lo && (hi - 1) * stride + offset >= width) --hi;
  return {lo, hi};
}

}  // namespace

void im2col(const ConvGeometry& g, const float* x, int first, int count, float* col) {
  const int oh_n = g.out_h(), ow_n = g.out_w();
  const std::size_t plane = static_cast<std::size_t>(g.in_h) * g.in_w;
  const std::size_t out_plane = static_cast<std::size_t>(oh_n) * ow_n;
  const std::size_t ld = out_plane * count;
  const int taps = g.kernel_h * g.kernel_w;
  // Rows are independent, so the compute threads split them (conv1 has one channel but 25).
  parallel_for(g.patch(), 1, [&](std::int64_t row_begin, std::int64_t row_end) {
    for (std::int64_t r = row_begin; r < row_end; ++r) {
      const int c = static_cast<int>(r / taps);
      const int ki = static_cast<int>(r % taps) / g.kernel_w;
      const int kj = static_cast<int>(r % taps) % g.kernel_w;
      float* row = col + static_cast<std::size_t>(r) * ld;
      const int off_w = kj - g.pad_w;
      const ValidRange vr = valid_range(ow_n, g.in_w, g.stride_w, off_w);
      for (int n = 0; n < count; ++n) {
        const float* src = x + (static_cast<std::size_t>(first + n) * g.in_channels + c) * plane;
        float* dst = row + n * out_plane;
        for (int oh = 0; oh < oh_n; ++oh, dst += ow_n) {
          const int ih = oh * g.stride_h - g.pad_h + ki;
          if (ih < 0 || ih >= g.in_h) {
            std::fill(dst, dst + ow_n, 0.0f);
            continue;
          }
          const float* s = src + static_cast<std::size_t>(ih) * g.in_w;
          std::fill(dst, dst + vr.lo, 0.0f);
          if (g.stride_w == 1) {
            std::memcpy(dst + vr.lo, s + vr.lo + off_w, sizeof(float) * (vr.hi - vr.lo));
          } else {
            for (int ow = vr.lo; ow < vr.hi; ++ow) dst[ow] = s[ow * g.stride_w + off_w];
          }
          std::fill(dst + vr.hi, dst + ow_n, 0.0f);
        }
      }
    }
  });
}

void col2im(const ConvGeometry& g, const float* col, int first, int count, float* dx) {
  const int oh_n = g.out_h(), ow_n = g.out_w();
  const std::size_t plane = static_cast<std::size_t>(g.in_h) * g.in_w;
  const std::size_t out_plane = static_cast<std::size_t>(oh_n) * ow_n;
  const std::size_t ld = out_plane * count;
  // Channels write disjoint planes of dx, so the compute threads split them.
  parallel_for(g.in_channels, 1, [&](std::int64_t c_begin, std::int64_t c_end) {
    for (int c = static_cast<int>(c_begin); c < c_end; ++c) {
      for (int ki = 0; ki < g.kernel_h; ++ki) {
        for (int kj = 0; kj < g.kernel_w; ++kj) {
          const float* row =
              col + ((static_cast<std::size_t>(c) * g.kernel_h + ki) * g.kernel_w + kj) * ld;
          const int off_w = kj - g.pad_w;
          const ValidRange vr = valid_range(ow_n, g.in_w, g.stride_w, off_w);
          for (int n = 0; n < count; ++n) {
            float* dst_plane =
                dx + (static_cast<std::size_t>(first + n) * g.in_channels + c) * plane;
            const float* src = row + n * out_plane;
            for (int oh = 0; oh < oh_n; ++oh, src += ow_n) {
              const int ih = oh * g.stride_h - g.pad_h + ki;
              if (ih < 0 || ih >= g.in_h) continue;
              float* d = dst_plane + static_cast<std::size_t>(ih) * g.in_w;
              if (g.stride_w == 1) {
                for (int ow = vr.lo; ow < vr.hi; ++ow) d[ow + off_w] += src[ow];
              } else {
                for (int ow = vr.lo; ow < vr.hi; ++ow) d[ow * g.stride_w + off_w] += src[ow];
              }
            }
          }
        }
      }
    }
  });
}

}  // namespace murmur::nn::cpu
