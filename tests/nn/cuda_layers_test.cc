// Every CUDA layer against its CPU twin on fresh random inputs: forward output, input gradient
// and parameter gradients within 1e-3 relative error (float32). [cuda]: skipped without a GPU.
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/arena.h"
#include "nn/activations.h"
#include "nn/batchnorm.h"
#include "nn/conv2d.h"
#include "nn/cuda/context.h"
#include "nn/cuda/device_arena.h"
#include "nn/cuda/layer.h"
#include "nn/dropout.h"
#include "nn/flatten.h"
#include "nn/linear.h"
#include "nn/pool.h"
#include "tests/nn/cuda_test_util.h"

namespace murmur::nn::cuda {
namespace {

using testing::download;
using testing::expect_close;
using testing::random_vector;
using testing::upload;

// Runs `host` (already absorbed/fused as wanted) alone on the CPU and its device twin on the
// GPU with the same parameters, input and output gradient, and compares everything.
void check_layer(const std::string& what, Layer& host, const Shape& sample, std::int64_t n,
                 bool training = true, std::uint64_t seed = 1) {
  Rng rng(seed);
  Arena params, grads, buffers;
  ParamDeclarer decl(params, buffers, "l.");
  host.declare(decl);
  params.allocate();
  grads = params.clone_layout();
  buffers.allocate();
  ParamViews views(params, grads, buffers);
  host.bind(views);
  host.init(rng);
  // Random parameters (BatchNorm's init is 1 and 0, which would hide a swapped scale/shift).
  for (float& p : params.flat()) p = static_cast<float>(rng.uniform(-0.5, 0.5));

  const Shape out_sample = host.output_shape(sample);
  const Shape in_shape = sample.batched(n), out_shape = out_sample.batched(n);
  std::vector<float> x = random_vector(in_shape.numel(), rng);
  std::vector<float> gy = random_vector(out_shape.numel(), rng);

  // CPU.
  std::vector<float> y(out_shape.numel()), gx(in_shape.numel()), gy_cpu = gy;
  std::vector<float> ws(std::max<std::size_t>(1, host.workspace_floats(sample, n)));
  StepContext ctx{.training = training, .rng = &rng, .accumulate_grads = false};
  Tensor tx(x.data(), in_shape), ty(y.data(), out_shape), tgy(gy_cpu.data(), out_shape),
      tgx(gx.data(), in_shape);
  const Arena buffers_before = [&] {
    Arena b = buffers.clone_layout();
    std::copy(buffers.flat().begin(), buffers.flat().end(), b.flat().begin());
    return b;
  }();
  Context cx(0);
  DeviceArena dparams(params), dgrads(grads), dbuffers(buffers);
  dparams.copy_from_host(params, cx.stream());
  dbuffers.copy_from_host(buffers_before, cx.stream());
  cx.synchronize();
  host.forward(tx, ty, ws, ctx);
  host.backward(tx, ty, tgy, tgx, ws, ctx);

  // GPU.
  auto device = make_device_layer(host, "l", DeviceArenas{dparams, dgrads, dbuffers});
  REQUIRE(device != nullptr);
  DeviceBuffer dx = upload(x), dgy = upload(gy);
  DeviceBuffer dy(out_shape.numel() * sizeof(float)), dgx(in_shape.numel() * sizeof(float));
  DeviceBuffer dws(std::max<std::size_t>(1, device->workspace_floats(sample, n)) * sizeof(float));
  Tensor ex(dx.floats(), in_shape), ey(dy.floats(), out_shape), egy(dgy.floats(), out_shape),
      egx(dgx.floats(), in_shape);
  device->forward(cx, ex, ey, dws.floats(), ctx);
  device->backward(cx, ex, ey, egy, egx, dws.floats(), ctx);
  cx.synchronize();

  expect_close(what + " forward", download(dy.floats(), y.size()), y);
  expect_close(what + " input grad", download(dgx.floats(), gx.size()), gx);
  for (const ArenaEntry& e : grads.entries()) {
    const std::vector<float> got = download(dgrads.view(e.name), e.numel);
    const auto want = grads.view(e.name);
    expect_close(what + " grad " + e.name, got, std::vector<float>(want.begin(), want.end()));
  }
  for (const ArenaEntry& e : buffers.entries()) {
    const std::vector<float> got = download(dbuffers.view(e.name), e.numel);
    const auto want = buffers.view(e.name);
    expect_close(what + " buffer " + e.name, got, std::vector<float>(want.begin(), want.end()));
  }
}

TEST_CASE("CUDA Linear matches the CPU layer", "[cuda][linear]") {
  MURMUR_REQUIRE_GPU();
  Linear plain(784, 512);
  check_layer("Linear(784->512)", plain, Shape{784}, 64);
  Linear fused(300, 77);
  ReLU relu;
  REQUIRE(fused.absorb(relu));
  check_layer("Linear(300->77)+ReLU", fused, Shape{300}, 33);
  Linear nobias(10, 3, /*bias=*/false);
  check_layer("Linear(10->3, no bias)", nobias, Shape{10}, 5);
}

TEST_CASE("CUDA Conv2d matches the CPU layer", "[cuda][conv]") {
  MURMUR_REQUIRE_GPU();
  Conv2d conv1(1, 32, 5);
  check_layer("Conv2d(1->32, 5x5)", conv1, Shape{1, 28, 28}, 16);
  Conv2d conv2(32, 64, 5);
  ReLU relu;
  REQUIRE(conv2.absorb(relu));
  check_layer("Conv2d(32->64, 5x5)+ReLU", conv2, Shape{32, 12, 12}, 8);
  Conv2d padded(3, 8, Conv2dOptions{3, 3, 2, 2, 1, 1, false});
  check_layer("Conv2d(3->8, 3x3, s2, p1, no bias)", padded, Shape{3, 9, 11}, 4);
}

TEST_CASE("CUDA pooling matches the CPU layers", "[cuda][pool]") {
  MURMUR_REQUIRE_GPU();
  MaxPool2d max2(2);
  check_layer("MaxPool2d(2)", max2, Shape{32, 24, 24}, 8);
  MaxPool2d max3(3, 2, 1);
  check_layer("MaxPool2d(3, s2, p1)", max3, Shape{4, 9, 9}, 3);
  AvgPool2d avg2(2);
  check_layer("AvgPool2d(2)", avg2, Shape{8, 10, 10}, 4);
  AvgPool2d avg3(3, 2, 1);
  check_layer("AvgPool2d(3, s2, p1)", avg3, Shape{4, 9, 9}, 3);
}

TEST_CASE("CUDA BatchNorm2d matches the CPU layer in training", "[cuda][batchnorm]") {
  MURMUR_REQUIRE_GPU();
  BatchNorm2d bn(16);
  check_layer("BatchNorm2d(16)", bn, Shape{16, 7, 7}, 8);
}

TEST_CASE("CUDA ReLU, GELU and Dropout(p=0) match the CPU layers", "[cuda][activation]") {
  MURMUR_REQUIRE_GPU();
  ReLU relu;
  check_layer("ReLU", relu, Shape{1000}, 7);
  GELU gelu;
  check_layer("GELU", gelu, Shape{1000}, 7);
  Dropout off(0.0);
  check_layer("Dropout(p=0)", off, Shape{100}, 4);
  Dropout eval(0.5);
  check_layer("Dropout(p=0.5), evaluation", eval, Shape{100}, 4, /*training=*/false);
}

TEST_CASE("CUDA Dropout keeps 1-p of the values, scaled, and backward uses the same mask",
          "[cuda][dropout]") {
  MURMUR_REQUIRE_GPU();
  const double p = 0.3;
  const std::int64_t n = 100000;
  Dropout host(p);
  Arena a, g, b;
  a.allocate();
  g = a.clone_layout();
  b.allocate();
  DeviceArena da(a), dg(g), db(b);
  auto device = make_device_layer(host, "", DeviceArenas{da, dg, db});
  Context cx(0);
  Rng rng(3);
  std::vector<float> x = random_vector(n, rng, 0.5, 1.5), ones(n, 1.0f);
  DeviceBuffer dx = upload(x), dgy = upload(ones), dy(n * sizeof(float)), dgx(n * sizeof(float));
  DeviceBuffer mask(n * sizeof(float));
  const Shape shape{n};
  Tensor ex(dx.floats(), shape.batched(1)), ey(dy.floats(), shape.batched(1)),
      egy(dgy.floats(), shape.batched(1)), egx(dgx.floats(), shape.batched(1));
  StepContext ctx{.training = true, .rng = &rng, .accumulate_grads = false};
  device->forward(cx, ex, ey, mask.floats(), ctx);
  device->backward(cx, ex, ey, egy, egx, mask.floats(), ctx);
  const std::vector<float> y = download(dy.floats(), n), gx = download(dgx.floats(), n);
  const float scale = static_cast<float>(1 / (1 - p));
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (y[i] != 0.0f) {
      ++kept;
      REQUIRE(y[i] == Approx(x[i] * scale));
      REQUIRE(gx[i] == Approx(scale));
    } else {
      REQUIRE(gx[i] == 0.0f);
    }
  }
  const double kept_fraction = static_cast<double>(kept) / n;
  std::printf("cuda-check: %-44s kept %.4f (expected %.4f)\n", "Dropout(p=0.3) mask", kept_fraction,
              1 - p);
  CHECK(kept_fraction == Approx(1 - p).margin(0.01));  // 100000 draws: sd 0.0014
}

TEST_CASE("Flatten has no device twin: it is a view", "[cuda]") {
  MURMUR_REQUIRE_GPU();
  Flatten flatten;
  Arena a, g, b;
  a.allocate();
  g = a.clone_layout();
  b.allocate();
  DeviceArena da(a), dg(g), db(b);
  CHECK(make_device_layer(flatten, "", DeviceArenas{da, dg, db}) == nullptr);
}

TEST_CASE("Without a GPU, choosing one is a CudaError that says so", "[cuda][nogpu]") {
  if (device_count() > 0) {
    const int d = device_for_local_rank(5);
    CHECK(d >= 0);
    CHECK(d < device_count());
    return;
  }
  CHECK_THROWS_AS(device_for_local_rank(0), CudaError);
  CHECK_THROWS_WITH(device_for_local_rank(0), Catch::Contains("no CUDA device"));
}

}  // namespace
}  // namespace murmur::nn::cuda
