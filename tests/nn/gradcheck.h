// Finite-difference gradient checker for any nn::Layer, shared by the nn tests (linear,
// activations, conv, pool, batchnorm...). It runs the layer alone on a small random batch,
// takes L = sum(out * r) for a fixed random r, and compares backward's input and parameter
// gradients with central differences (L evaluated in double over the float outputs). The error
// of a tensor is ||analytic - numeric||_2 / max(||analytic||_2, ||numeric||_2, 1e-6): float
// rounding keeps it near 1e-5 for small layers, a wrong gradient puts it near 1.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/arena.h"
#include "core/host_memory.h"
#include "core/rng.h"
#include "nn/layer.h"

namespace murmur::nn::testing {

struct GradCheckOptions {
  std::int64_t batch = 3;
  double eps = 1e-2;       // central-difference step
  bool training = true;    // StepContext::training (dropout/batchnorm behave as in training)
  std::uint64_t seed = 1;
  // Fills the input; default U(+-[0.1, 1]) so ReLU-like kinks at 0 are more than eps away.
  std::function<void(std::span<float>, Rng&)> fill_input;
};

struct GradCheckResult {
  double input_error = 0;                                  // 0 if no input gradient
  std::vector<std::pair<std::string, double>> param_errors;  // per declared parameter
  bool accumulate_ok = true;   // backward with accumulate_grads adds exactly once more
  bool input_untouched = true; // forward did not write its input
  double max_error() const {
    double m = input_error;
    for (const auto& [name, e] : param_errors) m = std::max(m, e);
    return m;
  }
  std::string str() const {
    std::string s = fmt::format("input: {:.3g}", input_error);
    for (const auto& [name, e] : param_errors) s += fmt::format(", {}: {:.3g}", name, e);
    if (!accumulate_ok) s += ", accumulate_grads broken";
    if (!input_untouched) s += ", forward wrote its input";
    return s;
  }
};

inline double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, na = 0, nb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return std::sqrt(diff) / std::max({std::sqrt(na), std::sqrt(nb), 1e-6});
}

// Checks `layer` (fresh: not yet declared) on inputs of per-sample shape `input`.
inline GradCheckResult grad_check(Layer& layer, const Shape& input,
                                  const GradCheckOptions& options = {}) {
  const std::int64_t n = options.batch;
  Arena params, buffers;
  ParamDeclarer decl(params, buffers, "");
  layer.declare(decl);
  params.allocate();
  buffers.allocate();
  Arena grads = params.clone_layout();
  ParamViews views(params, grads, buffers);
  layer.bind(views);
  Rng rng(options.seed);
  layer.init(rng);
  const Arena initial_buffers = [&] {
    Arena copy = buffers.clone_layout();
    std::copy(buffers.flat().begin(), buffers.flat().end(), copy.flat().begin());
    return copy;
  }();

  const Shape out_shape = layer.output_shape(input);
  HostBuffer x_mem = HostBuffer::floats(input.numel() * n);
  HostBuffer y_mem = HostBuffer::floats(out_shape.numel() * n);
  HostBuffer gx_mem = HostBuffer::floats(input.numel() * n);
  HostBuffer gy_mem = HostBuffer::floats(out_shape.numel() * n);
  HostBuffer ws_mem = HostBuffer::floats(layer.workspace_floats(input, n));
  Tensor x(x_mem.as_floats().data(), input.batched(n));
  Tensor y(y_mem.as_floats().data(), out_shape.batched(n));
  Tensor gx(gx_mem.as_floats().data(), input.batched(n));
  Tensor gy(gy_mem.as_floats().data(), out_shape.batched(n));
  std::span<float> ws = ws_mem.as_floats();

  Rng data_rng = rng.fork(99);
  if (options.fill_input) {
    options.fill_input(x.span(), data_rng);
  } else {
    for (float& v : x.span()) {
      const double m = data_rng.uniform(0.1, 1.0);
      v = static_cast<float>(data_rng.uniform() < 0.5 ? -m : m);
    }
  }
  std::vector<double> r(y.numel());
  for (double& v : r) v = data_rng.uniform(-1.0, 1.0);

  GradCheckResult result;
  // L(x, params) with the same dropout mask and the same starting buffers every time.
  auto loss = [&](bool check_input) {
    std::copy(initial_buffers.flat().begin(), initial_buffers.flat().end(), buffers.flat().begin());
    std::vector<float> before;
    if (check_input) before.assign(x.span().begin(), x.span().end());
    Rng mask_rng(options.seed + 7);
    StepContext ctx{options.training, &mask_rng, false};
    layer.forward(x, y, ws, ctx);
    if (check_input && !std::equal(before.begin(), before.end(), x.span().begin()))
      result.input_untouched = false;
    double l = 0;
    for (std::int64_t i = 0; i < y.numel(); ++i) l += static_cast<double>(y.data[i]) * r[i];
    return l;
  };
  auto analytic = [&](bool accumulate) {
    loss(true);
    for (std::int64_t i = 0; i < gy.numel(); ++i) gy.data[i] = static_cast<float>(r[i]);
    Rng mask_rng(options.seed + 7);
    StepContext ctx{options.training, &mask_rng, accumulate};
    layer.backward(x, y, gy, gx, ws, ctx);
  };
  auto numeric = [&](std::span<float> v) {
    std::vector<double> g(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      const float saved = v[i];
      v[i] = static_cast<float>(saved + options.eps);
      const double up = loss(false);
      v[i] = static_cast<float>(saved - options.eps);
      const double down = loss(false);
      v[i] = saved;
      g[i] = (up - down) / (2 * options.eps);
    }
    return g;
  };

  analytic(false);
  std::vector<double> gx_a(gx.span().begin(), gx.span().end());
  std::vector<double> gp_a(grads.flat().begin(), grads.flat().end());
  // Accumulating a second identical backward must exactly double every parameter gradient.
  analytic(true);
  for (std::size_t i = 0; i < gp_a.size(); ++i)
    if (std::abs(grads.flat()[i] - 2 * gp_a[i]) > 1e-5 * (1 + std::abs(gp_a[i])))
      result.accumulate_ok = false;

  result.input_error = relative_error(gx_a, numeric(x.span()));
  for (std::size_t e = 0; e < params.size(); ++e) {
    const ArenaEntry& entry = params.entries()[e];
    std::vector<double> a(gp_a.begin() + entry.offset, gp_a.begin() + entry.offset + entry.numel);
    result.param_errors.emplace_back(entry.name, relative_error(a, numeric(params.view(e))));
  }
  return result;
}

}  // namespace murmur::nn::testing
