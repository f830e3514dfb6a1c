// The op table's check, written once and run on every backend (ggml's test-backend-ops): each op
// runs on arrays of the device under test and on device::cpu() with the same inputs, and the
// results must agree: bitwise where the device computes on the CPU, within a relative error
// where it has kernels of its own (CUDA). `report(what, got, want)` does the comparing.
#pragma once

#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"
#include "device/device.h"

namespace murmur::device::testing {

using Report = std::function<void(const std::string& what, std::span<const float> got,
                                  std::span<const float> want)>;

inline std::vector<float> random_vector(std::size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.uniform(-1, 1));
  return v;
}

// `host` on `device`, and back.
inline Array on(Device& device, const std::vector<float>& host) {
  Array a = device.zeros(host.size());
  device.upload(a.span(), host);
  return a;
}
inline std::vector<float> back(Device& device, const Array& a) {
  std::vector<float> host(a.size());
  device.download(host, a.span());
  return host;
}

// Runs every op of the table on `device` and on the CPU; reports each pair of results.
inline void check_ops(Device& device, std::size_t n, const Report& report) {
  Device& cpu = device::cpu();
  Rng rng(11);
  std::vector<std::vector<float>> in;
  for (int k = 0; k < 12; ++k) in.push_back(random_vector(n, rng));
  std::vector<Array> d_in, c_in;
  for (const auto& v : in) {
    d_in.push_back(on(device, v));
    c_in.push_back(on(cpu, v));
  }
  auto twin = [&](auto op, const std::string& what) {
    Array d = on(device, in[0]), c = on(cpu, in[0]);
    op(device, d.span(), d_in);
    op(cpu, c.span(), c_in);
    report(what, back(device, d), back(cpu, c));
  };
  twin([](Device& dev, std::span<float> x, auto&) { dev.fill(x, 0.375f); }, "fill");
  twin([](Device& dev, std::span<float> x, auto& a) { dev.copy(x, a[1].span()); }, "copy");
  twin([](Device& dev, std::span<float> x, auto&) { dev.scale(x, -1.5f); }, "scale");
  twin([](Device& dev, std::span<float> x, auto& a) { dev.axpy(x, 3.0f, a[1].span()); }, "axpy");
  twin([](Device& dev, std::span<float> x, auto& a) { dev.axpby(x, 0.5f, a[1].span(), -2.0f); },
       "axpby");
  twin([](Device& dev, std::span<float> x, auto& a) {
    dev.add_scaled_diff(x, 0.7f, a[2].span(), a[3].span());
  }, "add_scaled_diff");
  twin([](Device& dev, std::span<float> x, auto& a) {
    std::vector<const float*> inputs;
    std::vector<float> weights;
    for (int k = 1; k < 12; ++k) {  // more inputs than one CUDA launch takes
      inputs.push_back(a[k].data());
      weights.push_back(0.01f * static_cast<float>(k));
    }
    dev.mix(x, 0.25f, inputs, weights);
  }, "mix (11 inputs)");
  {
    const double got = device.squared_distance(d_in[4].span(), d_in[5].span());
    const double want = cpu.squared_distance(c_in[4].span(), c_in[5].span());
    report("squared_distance", std::vector<float>{static_cast<float>(got)},
           std::vector<float>{static_cast<float>(want)});
  }
  // The local optimizers' updates: three steps each, state carried between them.
  struct Case {
    const char* name;
    SgdStep sgd;
    bool adamw = false;
  };
  std::vector<Case> cases(4);
  cases[0] = {"sgd", {0.05f, 0.0f, 0.0f, false, false}};
  cases[1] = {"sgd momentum+wd", {0.05f, 0.9f, 1e-3f, false, false}};
  cases[2] = {"sgd nesterov", {0.05f, 0.9f, 5e-4f, true, false}};
  cases[3] = {"adamw", {}, true};
  for (const Case& c : cases) {
    Array dp = on(device, in[6]), cp = on(cpu, in[6]);
    Array d1 = device.zeros(n), d2 = device.zeros(n), c1 = cpu.zeros(n), c2 = cpu.zeros(n);
    for (int t = 0; t < 3; ++t) {
      const Array& dg = d_in[7 + t];
      const Array& cg = c_in[7 + t];
      if (c.adamw) {
        AdamWStep a;
        a.decay = 1 - 0.05f * 0.01f;
        a.step_size = 0.05f / static_cast<float>(1 - std::pow(0.9, t + 1));
        a.inv_bias2_sqrt = static_cast<float>(1 / std::sqrt(1 - std::pow(0.999, t + 1)));
        device.adamw_step(dp.span(), dg.span(), d1.span(), d2.span(), a);
        cpu.adamw_step(cp.span(), cg.span(), c1.span(), c2.span(), a);
      } else {
        SgdStep s = c.sgd;
        s.first_step = t == 0;
        device.sgd_step(dp.span(), dg.span(), d1.span(), s);
        cpu.sgd_step(cp.span(), cg.span(), c1.span(), s);
      }
    }
    report(std::string(c.name) + " params after 3 steps", back(device, dp), back(cpu, cp));
    report(std::string(c.name) + " state after 3 steps", back(device, d1), back(cpu, c1));
  }
  // Asynchronous copies land once their fence is ready.
  std::vector<float> host(n, 0.0f);
  auto fence = device.download_async(host, d_in[11].span());
  fence->wait();
  CHECK(fence->ready());
  report("download_async", host, in[11]);
}

}  // namespace murmur::device::testing
