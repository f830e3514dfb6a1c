// Conv2d: the im2col+GEMM kernels against a direct double-precision loop nest (forward and all
// three gradients, with stride, padding, non-square kernels and batches split into chunks),
// and the layer's backward against finite differences.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "gradcheck.h"
#include "nn/activations.h"
#include "nn/conv2d.h"
#include "nn/cpu/conv.h"

namespace {

using murmur::Rng;
using murmur::nn::cpu::ConvGeometry;

std::vector<float> random_vector(std::size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.uniform(-1.0, 1.0));
  return v;
}

struct Reference {
  std::vector<double> y, dx, dw, db;
};

// The definition of the convolution and its gradients, in double, one term at a time.
Reference direct_conv(const ConvGeometry& g, const std::vector<float>& x,
                      const std::vector<float>& w, const std::vector<float>& b,
                      const std::vector<float>& dy) {
  const int oh_n = g.out_h(), ow_n = g.out_w();
  Reference r;
  r.y.assign(g.out_size(), 0.0);
  r.dx.assign(g.in_size(), 0.0);
  r.dw.assign(w.size(), 0.0);
  r.db.assign(b.size(), 0.0);
  for (int n = 0; n < g.batch; ++n)
    for (int o = 0; o < g.out_channels; ++o)
      for (int oh = 0; oh < oh_n; ++oh)
        for (int ow = 0; ow < ow_n; ++ow) {
          const std::size_t yi =
              ((static_cast<std::size_t>(n) * g.out_channels + o) * oh_n + oh) * ow_n + ow;
          double s = b[o];
          r.db[o] += dy[yi];
          for (int c = 0; c < g.in_channels; ++c)
            for (int i = 0; i < g.kernel_h; ++i)
              for (int j = 0; j < g.kernel_w; ++j) {
                const int ih = oh * g.stride_h - g.pad_h + i, iw = ow * g.stride_w - g.pad_w + j;
                if (ih < 0 || iw < 0 || ih >= g.in_h || iw >= g.in_w) continue;
                const std::size_t xi =
                    ((static_cast<std::size_t>(n) * g.in_channels + c) * g.in_h + ih) * g.in_w + iw;
                const std::size_t wi =
                    ((static_cast<std::size_t>(o) * g.in_channels + c) * g.kernel_h + i) *
                        g.kernel_w +
                    j;
                s += static_cast<double>(x[xi]) * w[wi];
                r.dx[xi] += static_cast<double>(dy[yi]) * w[wi];
                r.dw[wi] += static_cast<double>(dy[yi]) * x[xi];
              }
          r.y[yi] = s;
        }
  return r;
}

// Max |a - b| / (1 + max |b|): a scale-free tolerance for float sums of many terms.
double scaled_error(const float* a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / (1.0 + scale);
}

void check_kernels(const ConvGeometry& g) {
  CAPTURE(g.batch, g.in_channels, g.in_h, g.in_w, g.out_channels, g.kernel_h, g.kernel_w,
          g.stride_h, g.stride_w, g.pad_h, g.pad_w, murmur::nn::cpu::conv2d_chunk(g));
  g.validate();
  Rng rng(42);
  const auto x = random_vector(g.in_size(), rng);
  const auto w = random_vector(static_cast<std::size_t>(g.out_channels) * g.patch(), rng);
  const auto b = random_vector(g.out_channels, rng);
  const auto dy = random_vector(g.out_size(), rng);
  const Reference ref = direct_conv(g, x, w, b, dy);

  std::vector<float> ws(murmur::nn::cpu::conv2d_workspace_floats(g));
  std::vector<float> y(g.out_size()), dx(g.in_size(), 7.0f), dw(w.size(), 7.0f), db(b.size(), 7.0f);
  murmur::nn::cpu::conv2d_forward(g, x.data(), w.data(), b.data(), y.data(), ws.data());
  CHECK(scaled_error(y.data(), ref.y) < 1e-5);

  // Both with columns kept from forward and recomputed; writes (not adds) the gradients.
  for (bool cached : {true, false}) {
    CAPTURE(cached);
    murmur::nn::cpu::conv2d_backward(g, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                                     db.data(), ws.data(), {false, cached});
    CHECK(scaled_error(dx.data(), ref.dx) < 1e-5);
    CHECK(scaled_error(dw.data(), ref.dw) < 1e-5);
    CHECK(scaled_error(db.data(), ref.db) < 1e-5);
    if (cached)
      murmur::nn::cpu::conv2d_forward(g, x.data(), w.data(), b.data(), y.data(), ws.data());
  }
  // accumulate adds one more gradient; a null dx is skipped.
  murmur::nn::cpu::conv2d_backward(g, x.data(), w.data(), dy.data(), nullptr, dw.data(), db.data(),
                                   ws.data(), {true, false});
  std::vector<double> dw2(ref.dw), db2(ref.db);
  for (double& v : dw2) v *= 2;
  for (double& v : db2) v *= 2;
  CHECK(scaled_error(dw.data(), dw2) < 1e-5);
  CHECK(scaled_error(db.data(), db2) < 1e-5);
}

}  // namespace

TEST_CASE("conv2d kernels match the direct definition", "[nn][conv]") {
  // batch, in_c, h, w, out_c, kh, kw, sh, sw, ph, pw
  check_kernels({2, 1, 8, 8, 3, 5, 5, 1, 1, 0, 0});
  check_kernels({3, 2, 7, 6, 4, 3, 3, 2, 2, 1, 1});
  check_kernels({2, 3, 9, 5, 2, 2, 3, 2, 1, 1, 0});
  check_kernels({1, 2, 5, 5, 2, 5, 5, 1, 1, 2, 2});  // one sample: GEMM writes y directly
  check_kernels({2, 1, 4, 4, 2, 1, 1, 3, 3, 0, 0});  // 1x1 kernel, stride past the input
}

TEST_CASE("conv2d kernels split a large batch into chunks correctly", "[nn][conv]") {
  // 64 * 9 * 48 * 48 floats of columns per sample: the budget holds fewer than 5 samples.
  const ConvGeometry g{5, 64, 48, 48, 2, 3, 3, 1, 1, 1, 1};
  REQUIRE(murmur::nn::cpu::conv2d_chunk(g) > 1);
  REQUIRE(murmur::nn::cpu::conv2d_chunk(g) < g.batch);
  check_kernels(g);
}

TEST_CASE("conv2d geometry is validated", "[nn][conv]") {
  CHECK_THROWS_AS((ConvGeometry{1, 1, 4, 4, 1, 5, 5, 1, 1, 0, 0}.validate()), murmur::ConfigError);
  CHECK_NOTHROW((ConvGeometry{1, 1, 4, 4, 1, 5, 5, 1, 1, 1, 1}.validate()));
  CHECK_THROWS_AS((ConvGeometry{1, 1, 4, 4, 1, 3, 3, 0, 1, 0, 0}.validate()), murmur::ConfigError);
  CHECK_THROWS_AS((ConvGeometry{1, 1, 4, 4, 1, 3, 3, 1, 1, -1, 0}.validate()), murmur::ConfigError);
  murmur::nn::Conv2d conv(3, 8, 5);
  CHECK(conv.output_shape({3, 28, 28}) == murmur::nn::Shape{8, 24, 24});
  CHECK_THROWS_AS(conv.output_shape({1, 28, 28}), murmur::ConfigError);
  CHECK_THROWS_AS(conv.output_shape({3, 4, 28}), murmur::ConfigError);
  CHECK_THROWS_AS(conv.output_shape({3, 28}), murmur::ConfigError);
  CHECK_THROWS_AS(murmur::nn::Conv2d(3, 8, 0), murmur::ConfigError);
  CHECK(murmur::nn::Conv2d(3, 8, 3, 2, 1).output_shape({3, 7, 7}) == murmur::nn::Shape{8, 4, 4});
}

TEST_CASE("Conv2d backward matches finite differences", "[nn][conv][gradcheck]") {
  using murmur::nn::Conv2d;
  using murmur::nn::Conv2dOptions;
  struct Case {
    const char* name;
    Conv2dOptions opt;
    murmur::nn::Shape input;
  };
  const Case cases[] = {
      {"3x3", {3, 3, 1, 1, 0, 0, true}, {2, 5, 5}},
      {"3x3 stride 2 pad 1", {3, 3, 2, 2, 1, 1, true}, {2, 6, 5}},
      {"2x3 stride 2x1 pad 1x0 no bias", {2, 3, 2, 1, 1, 0, false}, {3, 5, 6}},
      {"5x5 pad 2", {5, 5, 1, 1, 2, 2, true}, {1, 6, 6}},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      Conv2d conv(c.input[0], 3, c.opt);
      const auto r = murmur::nn::testing::grad_check(conv, c.input);
      INFO(r.str());
      CHECK(r.max_error() < 1e-3);
      CHECK(r.accumulate_ok);
      CHECK(r.input_untouched);
    }
  }
}

// A finite-difference check through a ReLU trips on pre-activations near its kink, so the fused
// layer is checked against the plain Conv2d (itself checked above) followed by ReLU's rule.
TEST_CASE("Conv2d with an absorbed ReLU equals Conv2d then ReLU", "[nn][conv]") {
  using murmur::nn::Shape;
  using murmur::nn::Tensor;
  murmur::nn::Conv2d plain(2, 3, 3, 1, 1), fused(2, 3, 3, 1, 1);
  REQUIRE(fused.absorb(murmur::nn::ReLU()));
  CHECK_FALSE(fused.absorb(murmur::nn::ReLU()));  // only one
  CHECK_FALSE(plain.fused_relu());
  murmur::Arena params, params2, buffers, buffers2;
  murmur::nn::ParamDeclarer decl(params, buffers, ""), decl2(params2, buffers2, "");
  plain.declare(decl);
  fused.declare(decl2);
  for (murmur::Arena* a : {&params, &params2, &buffers, &buffers2}) a->allocate();
  murmur::Arena grads_plain = params.clone_layout(), grads_fused = params.clone_layout();
  murmur::nn::ParamViews views_plain(params, grads_plain, buffers);
  murmur::nn::ParamViews views_fused(params2, grads_fused, buffers2);
  plain.bind(views_plain);
  fused.bind(views_fused);
  Rng rng(5);
  plain.init(rng);
  std::copy(params.flat().begin(), params.flat().end(), params2.flat().begin());
  const Shape in_shape{2, 4, 4};
  const std::int64_t n = 3;
  std::vector<float> x = random_vector(in_shape.numel() * n, rng);
  const Shape out_shape = plain.output_shape(in_shape);
  const std::size_t m = out_shape.numel() * n;
  std::vector<float> y1(m), y2(m), g1 = random_vector(m, rng), g2 = g1;
  std::vector<float> dx1(x.size()), dx2(x.size());
  std::vector<float> ws1(plain.workspace_floats(in_shape, n)),
      ws2(fused.workspace_floats(in_shape, n));
  Tensor tx(x.data(), in_shape.batched(n)), ty1(y1.data(), out_shape.batched(n)),
      ty2(y2.data(), out_shape.batched(n)), tg1(g1.data(), out_shape.batched(n)),
      tg2(g2.data(), out_shape.batched(n)), tdx1(dx1.data(), in_shape.batched(n)),
      tdx2(dx2.data(), in_shape.batched(n));
  murmur::nn::StepContext ctx{true, &rng, false};
  plain.forward(tx, ty1, ws1, ctx);
  fused.forward(tx, ty2, ws2, ctx);
  int negative = 0;
  for (std::size_t i = 0; i < m; ++i) {
    negative += y1[i] < 0;
    REQUIRE(y2[i] == std::max(y1[i], 0.0f));
    if (y1[i] <= 0) g1[i] = 0;  // ReLU's backward, applied by hand for the plain layer
  }
  CHECK(negative > 0);
  plain.backward(tx, ty1, tg1, tdx1, ws1, ctx);
  fused.backward(tx, ty2, tg2, tdx2, ws2, ctx);
  CHECK(dx1 == dx2);
  CHECK(
      std::equal(grads_plain.flat().begin(), grads_plain.flat().end(), grads_fused.flat().begin()));
}

TEST_CASE("Conv2d declares PyTorch names and shapes and initializes in the default bounds",
          "[nn][conv]") {
  murmur::Arena params, buffers;
  murmur::nn::ParamDeclarer decl(params, buffers, "conv1.");
  murmur::nn::Conv2d conv(2, 4, 3);
  conv.declare(decl);
  params.allocate();
  buffers.allocate();
  murmur::Arena grads = params.clone_layout();
  murmur::nn::ParamViews views(params, grads, buffers);
  conv.bind(views);
  Rng rng(3);
  conv.init(rng);
  REQUIRE(params.size() == 2);
  CHECK(params.entries()[0].name == "conv1.weight");
  CHECK(params.entries()[0].shape == std::vector<std::int64_t>{4, 2, 3, 3});
  CHECK(params.entries()[1].name == "conv1.bias");
  CHECK(params.entries()[1].shape == std::vector<std::int64_t>{4});
  CHECK(buffers.size() == 0);
  const double bound = 1.0 / std::sqrt(2.0 * 3 * 3);
  for (std::size_t e = 0; e < 2; ++e) {
    auto v = params.view(e);
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    CHECK(*lo >= -bound);
    CHECK(*hi <= bound);
    CHECK(*hi - *lo > 0.5 * bound);  // actually drawn, not left at zero
  }
}
