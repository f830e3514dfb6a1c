// The CNN of build_cnn (names, shapes, size checks), and a cross-check of our conv, batch norm
// and pooling layers, and of the whole CNN, against PyTorch: both run forward and backward on
// the same inputs and parameters (handed over in a temp dir) and must agree. The PyTorch half
// runs where the test interpreter (tests/python.h) has torch; otherwise it is skipped.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/activations.h"
#include "nn/batchnorm.h"
#include "nn/cnn.h"
#include "nn/conv2d.h"
#include "nn/flatten.h"
#include "nn/pool.h"
#include "nn/sequential.h"
#include "tests/python.h"
#include "tests/skip.h"

namespace {

namespace fs = std::filesystem;
using murmur::Arena;
using murmur::Rng;
using murmur::nn::Sequential;
using murmur::nn::Shape;

// Builds each network of the cross-check in torch; the module attribute names are the
// murmur layer names, so the state_dicts match key for key.
constexpr const char* kTorchScript = R"PY(
import sys, numpy as np, torch, torch.nn as nn
torch.set_num_threads(1)
kind, d = sys.argv[1], sys.argv[2]
class Cnn(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv1 = nn.Conv2d(1, 32, 5); s.conv2 = nn.Conv2d(32, 64, 5)
        s.fc1 = nn.Linear(1024, 512); s.fc2 = nn.Linear(512, 10)
    def forward(s, x):
        x = torch.max_pool2d(torch.relu(s.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(s.conv2(x)), 2)
        return s.fc2(torch.relu(s.fc1(x.flatten(1))))
class Small(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv_a = nn.Conv2d(2, 4, 3, padding=1); s.bn = nn.BatchNorm2d(4)
        s.conv_b = nn.Conv2d(4, 3, (3, 2), stride=(2, 1), padding=(1, 0))
    def forward(s, x):
        x = torch.nn.functional.max_pool2d(torch.relu(s.bn(s.conv_a(x))), 3, 2, 1)
        return torch.nn.functional.avg_pool2d(s.conv_b(x), 2).flatten(1)
m, shape = (Cnn(), (1, 28, 28)) if kind == 'cnn' else (Small(), (2, 8, 8))
flat = np.fromfile(d + '/in.bin', dtype=np.float32)
rows = [l.split() for l in open(d + '/manifest.txt')]
at = 0
def take(count):
    global at
    at += count
    return torch.from_numpy(flat[at - count:at].copy())
n = int(rows[0][1])
x = take(n * int(np.prod(shape))).reshape(n, *shape)
g = take(int(rows[1][1]))
sd = m.state_dict()
params, buffers = [], []
for r in rows[2:]:
    t = take(int(r[2]))
    sd[r[1]] = t.reshape(sd[r[1]].shape).to(sd[r[1]].dtype)
    (params if r[0] == 'param' else buffers).append(r[1])
m.load_state_dict(sd)
m.train()
y = m(x)
y.backward(g.reshape(y.shape))
out = [y.detach().flatten()]
out += [m.get_parameter(p).grad.flatten() for p in params]
out += [m.state_dict()[b].float().flatten() for b in buffers]
torch.cat(out).numpy().astype(np.float32).tofile(d + '/out.bin')
)PY";

bool have_torch() { return murmur::test_python::can_import("torch"); }

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "murmur_cnn_test_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Max |a - b| / (1 + max |b|).
double scaled_error(const float* a, const float* b, std::size_t n) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / (1.0 + scale);
}

// Runs one training forward and backward of `net` (built for `input`) on random data, does the
// same in torch (`kind` in the script) and compares the output, every parameter gradient and
// every buffer after the step.
void cross_check_with_torch(Sequential& net, const Shape& input, const char* kind, int n) {
  Arena params, grads, buffers;
  net.build(input, params, grads, buffers);
  Rng rng(2024);
  net.init(rng);
  // Non-trivial affine parameters and running statistics, so every term is exercised.
  for (std::size_t e = 0; e < params.size(); ++e) {
    if (params.entries()[e].name.starts_with("bn."))
      for (float& v : params.view(e)) v = static_cast<float>(rng.uniform(0.5, 1.5));
  }
  for (std::size_t e = 0; e < buffers.size(); ++e) {
    const std::string& name = buffers.entries()[e].name;
    if (name.ends_with("running_mean"))
      for (float& v : buffers.view(e)) v = static_cast<float>(rng.uniform(-0.5, 0.5));
    if (name.ends_with("running_var"))
      for (float& v : buffers.view(e)) v = static_cast<float>(rng.uniform(0.5, 2.0));
  }
  std::vector<float> x(static_cast<std::size_t>(input.numel() * n));
  for (float& v : x) v = static_cast<float>(rng.normal());

  TempDir dir;
  std::ofstream in(dir.path / "in.bin", std::ios::binary);
  std::ofstream manifest(dir.path / "manifest.txt");
  auto put = [&](std::span<const float> v) {
    in.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size_bytes()));
  };
  put(x);
  manifest << "batch " << n << "\n";
  // Arenas as they were before the step (running stats move during forward).
  murmur::nn::StepContext ctx{true, &rng, false};
  std::vector<float> buffers_before(buffers.flat().begin(), buffers.flat().end());
  const murmur::nn::Tensor& y = net.forward(x.data(), n, ctx);
  const std::vector<float> out(y.span().begin(), y.span().end());
  std::vector<float> g(out.size());
  for (float& v : g) v = static_cast<float>(rng.uniform(-1, 1));
  std::copy(g.begin(), g.end(), net.output_grad().data);
  net.backward(ctx);
  put(g);
  manifest << "grad " << g.size() << "\n";
  for (std::size_t e = 0; e < params.size(); ++e) {
    put(params.view(e));
    manifest << "param " << params.entries()[e].name << " " << params.entries()[e].numel << "\n";
  }
  for (std::size_t e = 0; e < buffers.size(); ++e) {
    const auto& entry = buffers.entries()[e];
    put(std::span<const float>(buffers_before.data() + entry.offset, entry.numel));
    manifest << "buffer " << entry.name << " " << entry.numel << "\n";
  }
  in.close();
  manifest.close();
  std::ofstream(dir.path / "check.py") << kTorchScript;
  const std::string cmd =
      fmt::format("{} {} {} {}", murmur::test_python::interpreter(),
                  (dir.path / "check.py").string(), kind, dir.path.string());
  REQUIRE(std::system(cmd.c_str()) == 0);

  std::ifstream result(dir.path / "out.bin", std::ios::binary);
  std::vector<float> theirs(out.size() + params.num_elements() + buffers.num_elements());
  result.read(reinterpret_cast<char*>(theirs.data()),
              static_cast<std::streamsize>(theirs.size() * 4));
  REQUIRE(result.gcount() == static_cast<std::streamsize>(theirs.size() * 4));
  const float* t = theirs.data();
  CHECK(scaled_error(out.data(), t, out.size()) < 1e-4);
  t += out.size();
  for (std::size_t e = 0; e < params.size(); ++e) {
    INFO("gradient of " << params.entries()[e].name);
    auto ours = grads.view(e);
    CHECK(scaled_error(ours.data(), t, ours.size()) < 1e-4);
    t += ours.size();
  }
  for (std::size_t e = 0; e < buffers.size(); ++e) {
    INFO("buffer " << buffers.entries()[e].name);
    auto ours = buffers.view(e);
    CHECK(scaled_error(ours.data(), t, ours.size()) < 1e-5);
    t += ours.size();
  }
}

}  // namespace

TEST_CASE("build_cnn makes the LeNet-style CNN with PyTorch names", "[nn][cnn]") {
  Sequential net;
  murmur::nn::build_cnn(net, {1, 28, 28}, 10);
  Arena params, grads, buffers;
  net.build({1, 28, 28}, params, grads, buffers);
  CHECK(net.output() == Shape{10});
  const std::vector<std::pair<std::string, std::vector<std::int64_t>>> expect{
      {"conv1.weight", {32, 1, 5, 5}},  {"conv1.bias", {32}},
      {"conv2.weight", {64, 32, 5, 5}}, {"conv2.bias", {64}},
      {"fc1.weight", {512, 1024}},      {"fc1.bias", {512}},
      {"fc2.weight", {10, 512}},        {"fc2.bias", {10}}};
  REQUIRE(params.size() == expect.size());
  for (std::size_t i = 0; i < expect.size(); ++i) {
    CHECK(params.entries()[i].name == expect[i].first);
    CHECK(params.entries()[i].shape == expect[i].second);
  }
  CHECK(params.num_elements() == 582026);  // torch: sum(p.numel() for p in model.parameters())
  CHECK(buffers.size() == 0);
}

TEST_CASE("build_cnn rejects inputs too small for two conv+pool stages", "[nn][cnn]") {
  Sequential net;
  CHECK_THROWS_AS(murmur::nn::build_cnn(net, {1, 12, 28}, 10), murmur::ConfigError);
  Sequential net2;
  CHECK_THROWS_AS(murmur::nn::build_cnn(net2, {1, 28, 28}, 0), murmur::ConfigError);
  Sequential net3;  // a 3x32x32 input (CIFAR-like) makes fc1 1600 -> 512
  murmur::nn::build_cnn(net3, {3, 32, 32}, 10);
  Arena params, grads, buffers;
  net3.build({3, 32, 32}, params, grads, buffers);
  CHECK(params.entries()[4].shape == std::vector<std::int64_t>{512, 1600});
}

TEST_CASE("conv, batch norm and pooling agree with PyTorch", "[nn][cnn][torch]") {
  if (!have_torch()) MURMUR_SKIP("no torch");
  Sequential net;
  net.emplace<murmur::nn::Conv2d>("conv_a", 2, 4, 3, 1, 1);
  net.emplace<murmur::nn::BatchNorm2d>("bn", 4);
  net.emplace<murmur::nn::ReLU>("");
  net.emplace<murmur::nn::MaxPool2d>("", 3, 2, 1);
  net.emplace<murmur::nn::Conv2d>("conv_b", 4, 3,
                                  murmur::nn::Conv2dOptions{3, 2, 2, 1, 1, 0, true});
  net.emplace<murmur::nn::AvgPool2d>("", 2);
  net.emplace<murmur::nn::Flatten>("");
  cross_check_with_torch(net, {2, 8, 8}, "small", 5);
}

TEST_CASE("the CNN agrees with PyTorch", "[nn][cnn][torch]") {
  if (!have_torch()) MURMUR_SKIP("no torch");
  Sequential net;
  murmur::nn::build_cnn(net, {1, 28, 28}, 10);
  cross_check_with_torch(net, {1, 28, 28}, "cnn", 6);
}
