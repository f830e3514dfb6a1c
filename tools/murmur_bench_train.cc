// murmur-bench train: training throughput (samples/s) of the CPU models on in-memory random
// data shaped like Fashion-MNIST (1x28x28, 10 classes), one step = forward + backward + a
// momentum-SGD update on the flat arena (as the runtime does). Protocol, shared with
// tools/bench_torch.py: warm-up, then several timed repeats; the median repeat is reported.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/rng.h"
#include "device/device.h"
#include "nn/cpu/threads.h"
#include "nn/model.h"
#include "optimizers/local_optimizer.h"
#include "tools/bench_registry.h"

namespace murmur::tools {
namespace {

struct TrainBenchOptions {
  std::string model = "mlp";
  std::string threads = "1";
  int batch = 64;
  double seconds = 3.0;   // total timed seconds per row, split over the repeats
  int steps = 0;          // if > 0: steps per repeat instead of a time budget
  int repeats = 5;
  int warmup_steps = 20;
  bool json = false;
};

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      out.push_back(std::stoi(item));
    } catch (const std::exception&) {
      throw ConfigError(fmt::format("--threads: '{}' is not a list of integers", text));
    }
  }
  if (out.empty()) throw ConfigError("--threads: empty list");
  return out;
}

using Clock = std::chrono::steady_clock;

// Runs the benchmark of one (model, batch, threads) row; returns the median samples/s.
double bench_row(const std::string& name, int batch, int threads, const TrainBenchOptions& o) {
  nn::cpu::set_compute_threads(threads);
  ModelConfig config;
  config.name = name;
  Rng rng(1);
  auto model = nn::Model::create(config, nn::Shape3{1, 28, 28}, 10, rng);
  // A few distinct batches, so the step does not run on one cache-hot input.
  constexpr int kBatches = 8;
  const std::size_t sample = 28 * 28;
  std::vector<float> x(static_cast<std::size_t>(kBatches) * batch * sample);
  std::vector<std::int32_t> y(static_cast<std::size_t>(kBatches) * batch);
  Rng data(2);
  for (float& v : x) v = static_cast<float>(data.normal());
  for (auto& v : y) v = static_cast<std::int32_t>(data.below(10));

  // torch.optim.SGD(lr=0.01, momentum=0.9), the same optimizer murmur-peer trains with.
  OptimizerConfig sgd;
  sgd.name = "sgd";
  sgd.lr = 0.01;
  sgd.momentum = 0.9;
  auto optimizer = optimizers::make_local_optimizer(sgd, device::cpu(), model->params().flat().size());
  Rng step_rng(3);
  std::int64_t step = 0;
  auto train_step = [&] {
    const int b = static_cast<int>(step++ % kBatches);
    model->train_batch(x.data() + static_cast<std::size_t>(b) * batch * sample,
                       y.data() + static_cast<std::size_t>(b) * batch, batch, step_rng);
    optimizer->step(model->params().flat(), model->grads().flat(), static_cast<float>(sgd.lr));
  };

  for (int i = 0; i < o.warmup_steps; ++i) train_step();
  std::vector<double> rates;
  const double budget = o.seconds / std::max(o.repeats, 1);
  for (int r = 0; r < std::max(o.repeats, 1); ++r) {
    const auto start = Clock::now();
    std::int64_t done = 0;
    double elapsed = 0;
    do {
      train_step();
      ++done;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (o.steps > 0 ? done < o.steps : elapsed < budget);
    rates.push_back(static_cast<double>(done) * batch / elapsed);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

int run_train_bench(const TrainBenchOptions& o) {
  std::vector<std::string> models;
  if (o.model == "all") {
    models = {"mlp", "cnn"};
  } else {
    models = {o.model};
  }
  if (!o.json) std::printf("%-6s %6s %8s %14s\n", "model", "batch", "threads", "samples/s");
  for (const std::string& name : models) {
    for (int threads : parse_list(o.threads)) {
      double rate = 0;
      try {
        rate = bench_row(name, o.batch, threads, o);
      } catch (const ConfigError& e) {
        // "all" skips a model this build cannot create; a named model fails loudly.
        if (o.model != "all") throw;
        std::fprintf(stderr, "murmur-bench train: skipping %s: %s\n", name.c_str(), e.what());
        break;
      }
      if (o.json) {
        nlohmann::json row = {
            {"model", name}, {"batch", o.batch}, {"threads", threads}, {"samples_per_s", rate}};
        std::printf("%s\n", row.dump().c_str());
      } else {
        std::printf("%-6s %6d %8d %14.0f\n", name.c_str(), o.batch, threads, rate);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

const RegisterBench kRegisterTrain{BenchCommand{
    "train", "training throughput of the CPU models (samples/s)", [](CLI::App& sub) {
      auto o = std::make_shared<TrainBenchOptions>();
      sub.add_option("--model", o->model, "mlp | cnn | all")
          ->check(CLI::IsMember({"mlp", "cnn", "logreg", "all"}));
      sub.add_option("--threads", o->threads, "comma-separated compute thread counts, e.g. 1,2");
      sub.add_option("--batch", o->batch, "batch size")->check(CLI::Range(1, 1 << 20));
      auto* seconds = sub.add_option("--seconds", o->seconds, "timed seconds per row (all repeats)")
                          ->check(CLI::PositiveNumber);
      sub.add_option("--steps", o->steps, "steps per repeat (instead of --seconds)")
          ->check(CLI::Range(1, 1 << 30))
          ->excludes(seconds);
      sub.add_option("--repeats", o->repeats, "timed repeats; the median is reported")
          ->check(CLI::Range(1, 1000));
      sub.add_option("--warmup", o->warmup_steps, "untimed steps first")->check(CLI::Range(0, 1 << 30));
      sub.add_flag("--json", o->json, "one JSON object per line");
      return std::function<int()>([o] { return run_train_bench(*o); });
    }}};

}  // namespace
}  // namespace murmur::tools
