// The Communicator of murmur/murmur.h: a peer of a run whose model is the program's. It puts
// together what murmur-peer's Trainer does around its own model: the config and the world
// (runtime/run_directory.h), the transport and the averaging (runtime/distributed.h), the
// metrics, the final average and the results (runtime/summary.h, result_gather.h).
#include "api/murmur/murmur.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/buffers.h"
#include "api/model_check.h"
#include "core/config.h"
#include "core/logging.h"
#include "core/metrics.h"
#include "core/stopwatch.h"
#include "membership/neighborhood.h"
#include "nn/cpu/threads.h"
#include "optimizers/algorithm.h"
#include "runtime/default_config.h"
#include "runtime/distributed.h"
#include "runtime/peer.h"
#include "runtime/run_directory.h"
#include "runtime/stop_signal.h"
#include "runtime/summary.h"
#include "topology/mixing.h"
#include "transport/world.h"

namespace murmur {
namespace {

// murmur-launch's --set list: $MURMUR_SET, a JSON list of "key=value" strings (no newline, so
// that it crosses ssh as it is); none when unset.
std::vector<std::string> launcher_overrides() {
  const char* value = std::getenv("MURMUR_SET");
  if (value == nullptr || *value == '\0') return {};
  const nlohmann::json list = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> out;
  if (list.is_array()) {
    for (const auto& item : list) {
      if (!item.is_string()) break;
      out.push_back(item.get<std::string>());
    }
    if (out.size() == list.size()) return out;
  }
  throw ConfigError(fmt::format("$MURMUR_SET: expected a JSON list of \"key=value\" strings, as "
                                "murmur-launch sets it; got {}", value));
}

// The config of Options, then the program's overrides, then the launcher's; rank and world
// from the environment as murmur-peer takes them.
ExperimentConfig resolve_config(const Options& o) {
  ExperimentConfig c;
  const char* launched = std::getenv("MURMUR_CONFIG");
  if (!o.config_yaml.empty()) {
    c = load_config_string(o.config_yaml, "<config text>");
  } else if (!o.config_file.empty()) {
    c = load_config(o.config_file);
  } else if (launched != nullptr && *launched != '\0') {
    c = load_config(launched);
  } else {
    // murmur's own default (D-PSGD on a ring), its size left to the launcher's environment.
    c = load_config_string(runtime::kDefaultConfig, "<embedded default>");
    c.world.size = 1;
  }
  for (const auto& o : o.overrides) apply_override(c, o);
  for (const auto& o : launcher_overrides()) apply_override(c, o);
  const auto world = transport::resolve_world(c.world);
  c.world.rank = world.rank;
  c.world.size = world.size;
  return c;
}

}  // namespace

struct Communicator::Impl {
  Options options;
  ExperimentConfig config;
  std::filesystem::path out;
  int local_rank = 0;
  int local_size = 1;
  Stopwatch since_start;
  std::shared_ptr<transport::Transport> transport;  // none for a world of one
  std::unique_ptr<MetricsSink> metrics;

  std::unique_ptr<api::Parameters> params;  // after attach()
  std::unique_ptr<runtime::Distributed> dist;
  api::Devices devices;                     // the memory of primitives' buffers
  std::int64_t collective_round = 0;

  Stats stats;
  Stopwatch since_return;  // since after_step() last returned: the program's compute time
  bool stepping = false;
  double window_loss = 0;
  int window_steps = 0;
  std::int64_t window_samples = 0;
  Stopwatch window;  // since the last metrics line
  std::vector<runtime::EvalPoint> evals;
  Evaluation last_eval;
  double epoch = NAN;
  std::optional<Average> averaged;
  bool finished = false;

  int rank() const { return config.world.rank; }

  void take_comm_stats() {
    if (!dist) return;
    const auto s = dist->take_stats();
    stats.comm_s += s.comm_s;
    stats.wait_s += s.wait_s;
  }

  void check_attached(const char* what) const {
    if (finished) throw Error(fmt::format("{}: the run is finished (finish() was called)", what));
    if (averaged) throw Error(fmt::format("{}: the run is averaged (average() ends the training)", what));
    if (!params) throw Error(fmt::format("{}: attach() the parameters first", what));
  }

  // Device parameters on a stream of murmur's own: its ops must be done before the program's
  // kernels, on their stream, read the parameters again. (On the program's stream,
  // Options::cuda_stream, they are ordered already.)
  void settle() {
    if (params && !params->device().host_memory() && options.cuda_stream == nullptr) {
      params->device().synchronize();
    }
  }

  // An averaging in flight must land before the program (or a primitive) uses the transport.
  // After average() nothing is in flight, and the algorithm must not write its model (push-sum's
  // x / w) over the average.
  void flush() {
    if (!dist || averaged) return;
    dist->flush();
    take_comm_stats();
  }

  // A program's own collective needs the transport, which an asynchronous algorithm's responder
  // holds from the first after_step() until average() (optimizers/adpsgd.h).
  void check_transport_free(const char* what) const {
    if (dist && !averaged && dist->averaging().in_flight()) {
      throw Error(fmt::format("{}: not while algorithm {} runs (its responder uses the transport "
                              "from the first after_step() until average())", what,
                              config.algorithm.name));
    }
  }

  void log_step_line() {
    nlohmann::json line = {{"kind", "step"}, {"rank", rank()}, {"step", stats.step},
                           {"time_s", since_start.seconds()},
                           {"bytes_sent", transport ? transport->bytes_sent() : 0},
                           {"bytes_received", transport ? transport->bytes_received() : 0},
                           {"compute_s", stats.compute_s}, {"comm_s", stats.comm_s},
                           {"wait_s", stats.wait_s}};
    if (window_steps > 0) line["loss"] = window_loss / window_steps;
    if (window_samples > 0) line["samples_per_s"] = window_samples / std::max(1e-9, window.seconds());
    metrics->write(line);
    window_loss = 0;
    window_steps = 0;
    window_samples = 0;
    window.restart();
  }
};

Communicator::Communicator(const Options& options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.options = options;
  m.config = resolve_config(options);
  const char* launched_out = std::getenv("MURMUR_OUT");
  m.out = runtime::run_directory(
      m.config, !options.out.empty() ? options.out : launched_out != nullptr ? launched_out : "");
  runtime::use_launch_rendezvous(m.config, m.out);
  validate(m.config);
  membership::is_live(m.config.run.on_peer_failure);  // an unknown policy is a ConfigError here
  if (m.config.algorithm.average != "params") {
    // The API averages the parameters a program hands it; the program owns its backward.
    throw ConfigError(fmt::format(
        "algorithm.average: {} needs murmur-peer's training loop; a program averages its "
        "parameters (params), or its gradients itself with Communicator::allreduce",
        m.config.algorithm.average));
  }
  const auto warnings = optimizers::check_algorithm(m.config.algorithm, m.config.topology,
                                                    m.config.world.size, m.config.run.seed);
  init_logging(options.log_name.empty() ? fmt::format("peer {}", m.rank()) : options.log_name);
  if (m.rank() == 0) {
    for (const auto& w : warnings) log().warn("{}", w);
  }
  m.local_size = transport::local_size();
  m.local_rank = transport::local_rank(m.rank()) % std::max(1, m.local_size);
  if (options.size_threads) {
    // OpenBLAS is one library per process: on Debian the program's numpy and torch do their
    // GEMMs in it too, and its threads left at all cores in every peer of a node spin against
    // each other (a CNN step took 2.5x as long here with 4 peers on 2 cores).
    nn::cpu::set_compute_threads(compute_threads());
  }
  if (options.handle_signals) runtime::install_stop_handlers();
  runtime::open_run_directory(m.config, m.out);
  m.metrics = std::make_unique<MetricsSink>(m.out / fmt::format("rank{}", m.rank()) / "metrics.jsonl");
  if (m.config.world.size > 1) m.transport = runtime::make_run_transport(m.config, m.rank());
}

Communicator::~Communicator() {
  if (!impl_) return;
  // No flush: the program's buffers may be gone by now (declared after this object, or a
  // run ended by an exception), and completing an exchange writes into them. The algorithm
  // gives up what is in flight as it goes; finish() is where a run ends in order.
  try {
    impl_->metrics->flush();
  } catch (const std::exception& e) {
    log().warn("rank {}: while closing: {}", impl_->rank(), e.what());
  }
}

int Communicator::rank() const { return impl_->rank(); }
int Communicator::world_size() const { return impl_->config.world.size; }
int Communicator::local_rank() const { return impl_->local_rank; }
int Communicator::local_size() const { return impl_->local_size; }
int Communicator::compute_threads() const {
  return runtime::default_threads(impl_->config.run, impl_->local_size);
}
std::string Communicator::config_json() const { return to_json(impl_->config).dump(); }
std::string Communicator::out() const { return impl_->out.string(); }

void Communicator::attach(std::span<const Buffer> parameters, std::span<const std::string> description) {
  Impl& m = *impl_;
  if (m.params) throw Error("attach: the parameters are attached already (once per Communicator)");
  auto params = std::make_unique<api::Parameters>(parameters, m.devices, m.options.cuda_stream);
  std::vector<std::string> lines(description.begin(), description.end());
  if (lines.empty()) lines = params->describe();
  if (m.transport) {
    api::check_same_model(*m.transport, lines,
                          std::chrono::milliseconds(m.config.transport.connect_timeout_ms));
    m.dist = std::make_unique<runtime::Distributed>(m.config, m.rank(), params->device(),
                                                    params->arena(), m.transport);
  }
  m.params = std::move(params);
  log().info("rank {}: {} parameters in {} tensors; {} on {}", m.rank(), m.params->arena().size(),
             lines.size(), m.config.algorithm.name, m.params->device().describe());
}

std::int64_t Communicator::agree_start(std::int64_t step) {
  Impl& m = *impl_;
  m.check_attached("agree_start");
  if (!m.dist) return step;
  m.params->gather();
  const std::int64_t agreed = m.dist->agree_start(step);
  m.stats.step = agreed;
  return agreed;
}

void Communicator::after_step(std::int64_t step, double loss, std::int64_t samples) {
  Impl& m = *impl_;
  m.check_attached("after_step");
  if (m.stepping) m.stats.compute_s += m.since_return.seconds();
  m.stats.step = step;
  if (m.dist) {
    m.params->gather();
    try {
      m.dist->after_step(step);
    } catch (const PeerLost& e) {
      // A neighbor stopped on the same Ctrl-C first: the program stops with a checkpoint too.
      if (!m.options.handle_signals || !runtime::stop_requested_within(runtime::kStopGrace)) throw;
      log().warn("rank {}: a neighbor stopped first: {}", m.rank(), e.what());
    }
    m.params->scatter();
    m.take_comm_stats();
    m.settle();
  }
  if (!std::isnan(loss)) {
    m.window_loss += loss;
    ++m.window_steps;
  }
  m.window_samples += samples;
  if (step % m.config.run.log_every == 0) m.log_step_line();
  m.stepping = true;
  m.since_return.restart();
}

void Communicator::flush() {
  Impl& m = *impl_;
  if (!m.dist || !m.params || m.averaged) return;
  m.flush();
  m.params->scatter();
  m.settle();
}

void Communicator::log_eval(const Evaluation& e, double epoch) {
  Impl& m = *impl_;
  const runtime::EvalPoint point{m.stats.step, e.accuracy, m.since_start.seconds(), unix_seconds(),
                                 m.transport ? m.transport->bytes_sent() : 0};
  nlohmann::json line = {{"kind", "eval"}, {"rank", m.rank()}, {"step", point.step},
                         {"time_s", point.time_s}, {"test_accuracy", e.accuracy},
                         {"test_loss", e.loss}, {"bytes_sent", point.bytes_sent},
                         {"unix_s", point.unix_s}};
  if (!std::isnan(epoch)) {
    line["epoch"] = epoch;
    m.epoch = epoch;
  }
  m.metrics->write(line);
  m.evals.push_back(point);
  m.last_eval = e;
  log().info("rank {}: step {}: test accuracy {:.2f}%, loss {:.4f}", m.rank(), point.step,
             100 * e.accuracy, e.loss);
}

Average Communicator::average() {
  Impl& m = *impl_;
  m.check_attached("average");
  Average a;
  if (!m.dist) {
    a.ranks = {m.rank()};
    a.evaluator = true;
    m.averaged = a;
    return a;
  }
  const Stopwatch t;
  m.params->gather();
  m.dist->finish();
  m.dist->debiased(m.params->arena());
  const runtime::FinalAverage avg = m.dist->average(m.params->arena());
  m.params->scatter();
  m.settle();
  m.take_comm_stats();
  m.stats.comm_s += t.seconds();
  a.consensus_distance = avg.consensus_distance;
  a.ranks = avg.ranks;
  a.evaluator = !avg.ranks.empty() && avg.ranks.front() == m.rank();
  m.averaged = a;
  return a;
}

void Communicator::finish(const Evaluation& average_model) {
  Impl& m = *impl_;
  if (m.finished) throw Error("finish: called twice");
  m.finished = true;
  m.flush();
  m.log_step_line();
  runtime::PeerResult r;
  r.rank = m.rank();
  r.world_size = m.config.world.size;
  r.steps = m.stats.step;
  r.epochs = std::isnan(m.epoch) ? 0 : m.epoch;
  r.test_accuracy = m.last_eval.accuracy;
  r.test_loss = m.last_eval.loss;
  r.compute_s = m.stats.compute_s;
  r.comm_s = m.stats.comm_s;
  r.wait_s = m.stats.wait_s;
  r.stopped_early = runtime::stop_requested();
  if (m.dist) {
    if (const auto report = m.dist->averaging().exchange_report()) {
      r.exchanges = runtime::exchange_json(*report);
    }
  }
  if (m.transport) {
    r.backend = m.transport->name();
    r.bytes_sent = m.transport->bytes_sent();
    r.bytes_received = m.transport->bytes_received();
  }
  if (m.averaged) {
    r.consensus_distance = m.averaged->consensus_distance;
    if (m.averaged->evaluator) {
      r.has_average = true;
      r.average_ranks = m.averaged->ranks;
      r.average_test_accuracy = average_model.accuracy;
      r.average_test_loss = average_model.loss;
      log().info("average model: test accuracy {:.2f}%, loss {:.4f}; consensus distance {:.4g}",
                 100 * average_model.accuracy, average_model.loss, r.consensus_distance);
    }
  }
  r.evals = m.evals;
  r.wall_time_s = m.since_start.seconds();
  if (m.dist && m.averaged && !m.averaged->ranks.empty()) {
    r.gathered = m.dist->gather_results(m.averaged->ranks, runtime::peer_json(r));
  }
  m.metrics->flush();
  runtime::close_run_directory(m.config, m.out, r, r.wall_time_s);
  // The parameters are the program's again: nothing of murmur's touches them after this.
  m.dist.reset();
  m.params.reset();
}

Stats Communicator::stats() const {
  Stats s = impl_->stats;
  if (impl_->transport) {
    s.bytes_sent = impl_->transport->bytes_sent();
    s.bytes_received = impl_->transport->bytes_received();
  }
  return s;
}

bool Communicator::stop_requested() const { return runtime::stop_requested(); }
int Communicator::stop_signal() const { return runtime::stop_signal(); }

void Communicator::neighbor_average(Buffer x) {
  Impl& m = *impl_;
  const std::int64_t round = m.collective_round++;
  if (!m.transport) return;
  m.flush();
  m.check_transport_free("neighbor_average");
  api::neighbor_average(*m.transport, m.devices, x, m.config, round);
}

void Communicator::allreduce(Buffer x, bool mean) {
  Impl& m = *impl_;
  const std::int64_t round = m.collective_round++;
  if (!m.transport) return;
  m.flush();
  m.check_transport_free("allreduce");
  api::allreduce(*m.transport, m.devices, x, mean, m.config, round);
}

void Communicator::broadcast(Buffer x, int root) {
  Impl& m = *impl_;
  if (root < 0 || root >= world_size()) {
    throw Error(fmt::format("broadcast: root {} is not a rank of a world of {}", root, world_size()));
  }
  // The sum over peers of root's x and everyone else's zeros: root's x, exactly (x + 0 = x),
  // at an allreduce's cost.
  if (m.rank() != root && m.transport) {
    device::Device& dev = m.devices.of(x);
    dev.fill({x.data, x.count}, 0.0f);
    dev.synchronize();
  }
  allreduce(x, /*mean=*/false);
}

void Communicator::barrier() {
  float one = 1;
  allreduce({&one, 1}, false);
}

Neighbors Communicator::neighbors(std::int64_t round) const {
  const ExperimentConfig& c = impl_->config;
  const auto mix = topology::rank_mixing(c.topology, c.world.size, c.world.rank, c.run.seed, round);
  return {mix.self_weight, mix.recv_from, mix.recv_weights, mix.send_to, mix.send_weights};
}

}  // namespace murmur
