// The CPU backend of the op table: plain loops over contiguous memory that the compiler
// vectorizes (-O3 -march=native); the many-input mix walks the arrays in cache-sized blocks so
// each output element is loaded and stored once. The update loops follow torch's operation
// order, so float results match torch.optim.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/host_memory.h"
#include "device/device.h"

namespace murmur::device {
namespace {

// 16 KiB of output per block: with a handful of inputs the block stays in L1/L2 while every
// input streams through it once.
constexpr std::size_t kBlock = 4096;

// A fence of a copy that is already done.
class Done final : public Fence {
 public:
  bool ready() override { return true; }
  void wait() override {}
};

void check_same(std::size_t a, std::size_t b, const char* op) {
  if (a != b) throw Error(std::string("device::cpu ") + op + ": arrays of different sizes");
}

class Cpu : public Device {
 public:
  std::string describe() const override { return "cpu"; }
  bool host_memory() const override { return true; }

  Array zeros(std::size_t floats) override {
    auto buffer = std::make_shared<HostBuffer>(HostBuffer::floats(floats));
    return Array(buffer->as_floats().first(floats), buffer);
  }
  Array staging(std::size_t floats) override { return zeros(floats); }

  void download(std::span<float> host, std::span<const float> mine) override { copy(host, mine); }
  void upload(std::span<float> mine, std::span<const float> host) override { copy(mine, host); }
  std::unique_ptr<Fence> download_async(std::span<float> host, std::span<const float> mine) override {
    download(host, mine);
    return std::make_unique<Done>();
  }
  std::unique_ptr<Fence> upload_async(std::span<float> mine, std::span<const float> host) override {
    upload(mine, host);
    return std::make_unique<Done>();
  }
  void synchronize() override {}

  void fill(std::span<float> x, float v) override { std::fill(x.begin(), x.end(), v); }

  void copy(std::span<float> out, std::span<const float> x) override {
    check_same(out.size(), x.size(), "copy");
    if (!x.empty() && out.data() != x.data()) std::memcpy(out.data(), x.data(), x.size_bytes());
  }

  void scale(std::span<float> x, float a) override {
    for (float& v : x) v *= a;
  }

  void axpy(std::span<float> y, float a, std::span<const float> x) override {
    check_same(y.size(), x.size(), "axpy");
    float* __restrict out = y.data();
    const float* __restrict in = x.data();
    for (std::size_t i = 0, n = y.size(); i < n; ++i) out[i] += a * in[i];
  }

  void axpby(std::span<float> y, float a, std::span<const float> x, float b) override {
    check_same(y.size(), x.size(), "axpby");
    float* __restrict out = y.data();
    const float* __restrict in = x.data();
    for (std::size_t i = 0, n = y.size(); i < n; ++i) out[i] = a * in[i] + b * out[i];
  }

  void add_scaled_diff(std::span<float> y, float a, std::span<const float> u,
                       std::span<const float> v) override {
    check_same(y.size(), u.size(), "add_scaled_diff");
    check_same(y.size(), v.size(), "add_scaled_diff");
    float* __restrict out = y.data();
    const float* __restrict p = u.data();
    const float* __restrict q = v.data();
    for (std::size_t i = 0, n = y.size(); i < n; ++i) out[i] += a * (p[i] - q[i]);
  }

  void mix(std::span<float> x, float self, std::span<const float* const> inputs,
           std::span<const float> weights) override {
    check_same(inputs.size(), weights.size(), "mix");
    const std::size_t n = x.size(), m = inputs.size();
    float* __restrict out = x.data();
    for (std::size_t b = 0; b < n; b += kBlock) {
      const std::size_t e = std::min(n, b + kBlock);
      for (std::size_t i = b; i < e; ++i) out[i] *= self;
      for (std::size_t k = 0; k < m; ++k) {
        const float* __restrict in = inputs[k];
        const float w = weights[k];
        for (std::size_t i = b; i < e; ++i) out[i] += w * in[i];
      }
    }
  }

  double squared_distance(std::span<const float> x, std::span<const float> y) override {
    check_same(x.size(), y.size(), "squared_distance");
    double s = 0;
    for (std::size_t i = 0, n = x.size(); i < n; ++i) {
      const double d = static_cast<double>(x[i]) - y[i];
      s += d * d;
    }
    return s;
  }

  void sgd_step(std::span<float> params, std::span<const float> grads, std::span<float> buffer,
                const SgdStep& s) override {
    check_same(params.size(), grads.size(), "sgd_step");
    const std::size_t n = params.size();
    float* __restrict p = params.data();
    const float* __restrict g = grads.data();
    const float wd = s.weight_decay, mu = s.momentum, lr = s.lr;
    // One branch-free loop per case, so each vectorizes.
    if (mu == 0.0f) {
      for (std::size_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd * p[i]);
      return;
    }
    check_same(params.size(), buffer.size(), "sgd_step (momentum buffer)");
    float* __restrict b = buffer.data();
    if (s.first_step) {
      for (std::size_t i = 0; i < n; ++i) b[i] = g[i] + wd * p[i];
    } else {
      for (std::size_t i = 0; i < n; ++i) b[i] = mu * b[i] + (g[i] + wd * p[i]);
    }
    if (s.nesterov) {
      for (std::size_t i = 0; i < n; ++i) p[i] -= lr * ((g[i] + wd * p[i]) + mu * b[i]);
    } else {
      for (std::size_t i = 0; i < n; ++i) p[i] -= lr * b[i];
    }
  }

  void adamw_step(std::span<float> params, std::span<const float> grads, std::span<float> m,
                  std::span<float> v, const AdamWStep& a) override {
    check_same(params.size(), grads.size(), "adamw_step");
    check_same(params.size(), m.size(), "adamw_step (exp_avg)");
    check_same(params.size(), v.size(), "adamw_step (exp_avg_sq)");
    float* __restrict p = params.data();
    const float* __restrict g = grads.data();
    float* __restrict mm = m.data();
    float* __restrict vv = v.data();
    for (std::size_t i = 0, n = params.size(); i < n; ++i) {
      p[i] *= a.decay;
      mm[i] = a.beta1 * mm[i] + a.one_minus_beta1 * g[i];
      vv[i] = a.beta2 * vv[i] + a.one_minus_beta2 * g[i] * g[i];
      // Vectorizes (vsqrtps) only under -fno-math-errno: GCC keeps a scalar call for errno
      // otherwise, and its optimize("no-math-errno") attribute does not help (GCC 12).
      const float denom = std::sqrt(vv[i]) * a.inv_bias2_sqrt + a.eps;
      p[i] -= a.step_size * mm[i] / denom;
    }
  }
};

class OffHostCpu final : public Cpu {
 public:
  std::string describe() const override { return "cpu (off-host: staged like a GPU)"; }
  bool host_memory() const override { return false; }
};

}  // namespace

Device& cpu() {
  static Cpu device;
  return device;
}

std::unique_ptr<Device> make_offhost_cpu() { return std::make_unique<OffHostCpu>(); }

}  // namespace murmur::device
