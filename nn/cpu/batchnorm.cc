#include "nn/cpu/batchnorm.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::nn::cpu {
namespace {

// Sum over one channel: the batch's planes of that channel, each summed in float (short,
// vectorizes) and then added in double, so large batches lose no precision.
template <class F>
double channel_sum(const BatchNormGeometry& g, int c, F&& term) {
  double total = 0.0;
  for (int n = 0; n < g.batch; ++n) {
    const std::size_t base = (static_cast<std::size_t>(n) * g.channels + c) * g.plane;
    float s = 0.0f;
    for (int i = 0; i < g.plane; ++i) s += term(base + i);
    total += s;
  }
  return total;
}

// y = x * scale + shift over one channel.
void apply_affine(const BatchNormGeometry& g, int c, const float* x, float scale, float shift,
                  float* y) {
  for (int n = 0; n < g.batch; ++n) {
    const std::size_t base = (static_cast<std::size_t>(n) * g.channels + c) * g.plane;
    for (int i = 0; i < g.plane; ++i) y[base + i] = x[base + i] * scale + shift;
  }
}

}  // namespace

void batchnorm2d_forward_train(const BatchNormGeometry& g, const float* x, const float* weight,
                               const float* bias, float eps, float momentum, float* y, float* mean,
                               float* invstd, float* running_mean, float* running_var) {
  const std::size_t m = g.count();
  if (m < 2) {
    throw Error(fmt::format(
        "BatchNorm2d: training needs more than 1 value per channel, got input [{}, {}, {}]",
        g.batch, g.channels, g.plane));
  }
  for (int c = 0; c < g.channels; ++c) {
    // Two passes (mean, then squared deviations) rather than E[x^2] - E[x]^2, which cancels.
    const double mu = channel_sum(g, c, [&](std::size_t i) { return x[i]; }) / m;
    const float muf = static_cast<float>(mu);
    const double ss = channel_sum(g, c, [&](std::size_t i) {
      const float d = x[i] - muf;
      return d * d;
    });
    const double var = ss / m;
    const float is = static_cast<float>(1.0 / std::sqrt(var + eps));
    mean[c] = muf;
    invstd[c] = is;
    const float w = weight ? weight[c] : 1.0f;
    const float b = bias ? bias[c] : 0.0f;
    apply_affine(g, c, x, is * w, b - muf * is * w, y);
    running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * muf;
    running_var[c] = (1.0f - momentum) * running_var[c] +
                     momentum * static_cast<float>(ss / static_cast<double>(m - 1));
  }
}

void batchnorm2d_forward_eval(const BatchNormGeometry& g, const float* x, const float* weight,
                              const float* bias, float eps, const float* running_mean,
                              const float* running_var, float* y) {
  for (int c = 0; c < g.channels; ++c) {
    const float is = 1.0f / std::sqrt(running_var[c] + eps);
    const float w = weight ? weight[c] : 1.0f;
    const float b = bias ? bias[c] : 0.0f;
    apply_affine(g, c, x, is * w, b - running_mean[c] * is * w, y);
  }
}

void batchnorm_invstd(int channels, const float* var, float eps, float* invstd) {
  for (int c = 0; c < channels; ++c) invstd[c] = 1.0f / std::sqrt(var[c] + eps);
}

void batchnorm2d_backward(const BatchNormGeometry& g, bool training, const float* x,
                          const float* dy, const float* weight, const float* mean,
                          const float* invstd, float* dx, float* dweight, float* dbias,
                          bool accumulate) {
  const double m = static_cast<double>(g.count());
  for (int c = 0; c < g.channels; ++c) {
    const float mu = mean[c], is = invstd[c];
    const double sum_dy = channel_sum(g, c, [&](std::size_t i) { return dy[i]; });
    // sum(dy * xhat) with xhat = (x - mean) * invstd.
    const double sum_dy_xhat =
        channel_sum(g, c, [&](std::size_t i) { return dy[i] * (x[i] - mu); }) * is;
    if (dweight) dweight[c] = (accumulate ? dweight[c] : 0.0f) + static_cast<float>(sum_dy_xhat);
    if (dbias) dbias[c] = (accumulate ? dbias[c] : 0.0f) + static_cast<float>(sum_dy);
    if (!dx) continue;
    const float w = weight ? weight[c] : 1.0f;
    const float k = is * w;
    if (!training) {  // the statistics are constants: dx = dy * weight * invstd
      apply_affine(g, c, dy, k, 0.0f, dx);
      continue;
    }
    // The batch statistics depend on x too (Ioffe & Szegedy 2015, section 3):
    // dx = weight * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)).
    const float mean_dy = static_cast<float>(sum_dy / m);
    const float proj = static_cast<float>(sum_dy_xhat / m) * is;  // multiplies (x - mean)
    for (int n = 0; n < g.batch; ++n) {
      const std::size_t base = (static_cast<std::size_t>(n) * g.channels + c) * g.plane;
      for (int i = 0; i < g.plane; ++i) {
        const std::size_t j = base + i;
        dx[j] = k * (dy[j] - mean_dy - (x[j] - mu) * proj);
      }
    }
  }
}

}  // namespace murmur::nn::cpu
