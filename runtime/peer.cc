#include "runtime/peer.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/metrics.h"
#include "core/progress.h"
#include "core/stopwatch.h"
#include "nn/batch_loader.h"
#include "nn/cpu/threads.h"
#include "nn/dataset.h"
#include "nn/model.h"
#include "nn/partition.h"
#include "membership/neighborhood.h"
#include "optimizers/algorithm.h"
#include "optimizers/dgc.h"
#include "optimizers/local_optimizer.h"
#include "optimizers/lr_schedule.h"
#include "runtime/batch_plan.h"
#include "runtime/checkpoint.h"
#include "runtime/device_model.h"
#include "runtime/distributed.h"
#include "runtime/evaluate.h"
#include "runtime/sample_shuffle.h"
#include "runtime/stop_signal.h"
#include "runtime/summary.h"

namespace murmur::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string format_eta(double seconds) {
  const auto s = static_cast<long>(std::max(0.0, seconds));
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}m{:02d}s", s / 60, s % 60);
}

// One peer's training state and loop; run_peer() builds it and calls run().
class Trainer {
 public:
  Trainer(const ExperimentConfig& config, const PeerOptions& options, StepHooks hooks)
      : config_(config),
        options_(options),
        hooks_(std::move(hooks)),
        rank_(std::max(0, config.world.rank)),
        dir_(options.out / fmt::format("rank{}", rank_)),
        train_holder_(options.train ? options.train : load(config, /*train=*/true)),
        test_holder_(options.test ? options.test : load(config, /*train=*/false)),
        train_(*train_holder_),
        test_(*test_holder_),
        shuffle_(make_shuffle(config, train_, rank_)),
        // With data.shuffle the loader reads the peer's own copy of its shard, which trades
        // overwrite; else its shard's indices into the whole data set.
        loader_(shuffle_ ? shuffle_->local() : train_,
                shuffle_ ? shuffle_->local_indices()
                         : nn::partition_indices(train_.labels, train_.classes, config.world.size,
                                                 rank_, config.data, config.run.seed),
                config.train.batch_size, Rng(config.run.seed).fork(1000 + rank_).next_u64()),
        rng_(Rng(config.run.seed).fork(2000 + rank_)),
        metrics_(dir_ / "metrics.jsonl"),
        progress_(options.interactive) {
    // Every peer draws the same initial parameters from the run seed: consensus from step 0.
    Rng init(config.run.seed);
    model_ = nn::Model::create(config.model, {train_.channels, train_.height, train_.width},
                               train_.classes, init);
    // run.device: the arenas the optimizer and the averaging work on live there.
    on_device_ = make_device_model(config, *model_, rank_);
    params_ = on_device_->params();
    grads_ = on_device_->grads();
    device::Device& dev = on_device_->device();
    saved_ = dev.zeros(params_.size());
    if (config.world.size > 1) {
      dist_ = std::make_unique<Distributed>(config, rank_, dev, params_, options.transport);
      dist_->attach_gradients(grads_);
      if (dist_->averages_gradients()) {
        grads_ready_ = [this](std::size_t offset) { dist_->grads_ready(step_ + 1, offset); };
      }
    }
    // Under DGC the averaging applies momentum and decay before it sends (optimizers/dgc.h).
    optimizer_ = optimizers::make_local_optimizer(
        optimizers::local_optimizer_config(config.train.optimizer, config.algorithm,
                                           config.world.size),
        dev, params_.size(), model_->params().entries());
    if (!dev.host_memory()) {
      log().info("rank {}: training on {}", rank_, on_device_->describe());
      if (dist_) log().info("rank {}: parameters move: {}", rank_, dist_->describe_path());
    }
    // Every peer must take the same number of steps (a neighbor waits for each exchange), also
    // when a non-IID split gives the shards different sizes: an epoch is the whole data set's
    // size over the peers, in batches; a smaller shard is simply reshuffled sooner.
    // With train.batch_ramp, an epoch's batch grows, and its steps shrink (batch_plan.h).
    const std::int64_t per_peer = (train_.size + config.world.size - 1) / config.world.size;
    plan_.emplace(config.train, per_peer);
    total_steps_ = plan_->total_steps();
    if (config.train.max_steps > 0) total_steps_ = std::min(total_steps_, config.train.max_steps);
    // schedule.scale_rule: the lr for the global batch (Goyal et al.'s linear scaling rule).
    OptimizerConfig scaled = config.train.optimizer;
    scaled.lr *= optimizers::lr_scale(config.train, config.world.size);
    schedule_ = std::make_unique<optimizers::LrSchedule>(scaled, config.train.schedule,
                                                         total_steps_);
    if (rank_ == 0 && (scaled.lr != config.train.optimizer.lr || plan_->max_batch() >
                                                                    config.train.batch_size)) {
      log().info("global batch {} x {} peers: lr {:.4g} (scale_rule {}), batch per epoch [{}]",
                 config.train.batch_size, config.world.size, scaled.lr,
                 config.train.schedule.scale_rule, fmt::join(plan_->batches(), ", "));
    }
    x_.resize(static_cast<std::size_t>(plan_->max_batch() * train_.sample_floats()));
    y_.resize(static_cast<std::size_t>(plan_->max_batch()));
    config_json_ = to_json(config).dump();
    log().info("rank {}: {} ({} parameters), {} training samples in this shard, {} steps",
               rank_, config.model.name, model_->num_params(), loader_.size(), total_steps_);
    if (shuffle_ && rank_ == 0) {
      log().info("sample shuffle: each peer trades {} samples every {} steps", shuffle_->per_round(),
                 shuffle_->every_steps());
    }
  }

  PeerResult run() {
    const auto start = Clock::now();
    if (config_.checkpoint.resume) resume();
    rejoin_if_restarted();
    double window_loss = 0;
    int window_steps = 0;
    auto window_start = Clock::now();
    std::int64_t window_samples = 0;
    bool evaluated_last = false;
    bool neighbor_stopped = false;
    while (step_ < total_steps_ && !stop_requested()) {
      const auto t = Clock::now();
      loader_.set_batch_size(plan_->batch_at(step_));
      const int n = loader_.next(x_.data(), y_.data());
      const double lr = schedule_->at(step_);
      const float loss = on_device_->train_batch(x_.data(), y_.data(), n, rng_,
                                                 grads_ready_ ? &grads_ready_ : nullptr);
      double exposed = 0;  // the gradient exchange's wait, counted as communication
      if (grads_ready_) {
        const auto e = Clock::now();
        try {
          dist_->average_gradients(step_ + 1);
        } catch (const PeerLost& lost) {
          // This step is not taken: the checkpoint holds the model before it.
          neighbor_stopped_first(lost);
          neighbor_stopped = true;
          break;
        }
        exposed = seconds_since(e);
      }
      optimizer_->step(params_, grads_, static_cast<float>(lr));
      for (auto& hook : hooks_) hook->after_compute(step_ + 1, seconds_since(t) - exposed);
      compute_s_ += seconds_since(t) - exposed;
      ++step_;
      if (dist_) {
        try {
          dist_->after_step(step_);
        } catch (const PeerLost& e) {
          neighbor_stopped_first(e);
          neighbor_stopped = true;
          break;
        }
        take_comm_stats();
        if (shuffle_) {
          const auto e = Clock::now();
          try {
            shuffle_->after_step(dist_->transport(), step_, recv_timeout());
          } catch (const PeerLost& lost) {
            neighbor_stopped_first(lost);
            neighbor_stopped = true;
            break;
          }
          comm_s_ += seconds_since(e);
        }
      }
      window_loss += loss;
      ++window_steps;
      window_samples += n;
      evaluated_last = false;
      if (step_ % config_.run.log_every == 0 || step_ == total_steps_) {
        const double rate = window_samples / std::max(1e-9, seconds_since(window_start));
        log_step(window_loss / window_steps, lr, rate, start);
        window_loss = 0;
        window_steps = 0;
        window_samples = 0;
        window_start = Clock::now();
      }
      const int every = config_.eval.every_steps;
      if ((every > 0 && step_ % every == 0) || (every == 0 && plan_->ends_epoch(step_))) {
        log_eval(start);
        evaluated_last = true;
      }
      if (config_.checkpoint.every_steps > 0 && step_ % config_.checkpoint.every_steps == 0 &&
          step_ < total_steps_) {
        // Every peer checkpoints this step: the trade in flight lands first, on both its ends
        // (posted at this very step, it lands a step earlier than without the checkpoint).
        if (shuffle_) shuffle_->complete(dist_->transport(), recv_timeout());
        save(periodic_checkpoint_path(dir_, step_));
        prune_checkpoints(dir_, config_.checkpoint.keep);
      }
      for (auto& hook : hooks_) hook->after_step(step_);
    }
    std::filesystem::remove(dir_ / "running");  // ended cleanly: a restart is no rejoin
    PeerResult result;
    result.stopped_early = step_ < total_steps_ || neighbor_stopped;
    if (result.stopped_early) {
      save(periodic_checkpoint_path(dir_, step_));
      log().warn("rank {}: stopped by signal {} at step {}; checkpoint written", rank_,
                 stop_signal(), step_);
    } else {
      if (shuffle_) shuffle_->complete(dist_->transport(), recv_timeout());
      save_final();
    }
    const Evaluation e = evaluated_last ? last_eval_ : log_eval(start);
    progress_.finish(fmt::format("rank {}: done: {} steps, test accuracy {:.2f}%, loss {:.4f}",
                                 rank_, step_, 100 * e.accuracy, e.loss));
    metrics_.flush();
    result.rank = rank_;
    result.world_size = config_.world.size;
    result.steps = step_;
    result.parameters = params_.size();
    result.epochs = plan_->epoch_at(step_);
    result.test_accuracy = e.accuracy;
    result.test_loss = e.loss;
    result.compute_s = compute_s_;
    if (dist_ && !result.stopped_early) final_average(result);
    result.comm_s = comm_s_;
    result.wait_s = wait_s_;
    if (dist_) {
      if (const auto report = dist_->averaging().exchange_report()) {
        result.exchanges = exchange_json(*report);
      }
      result.backend = dist_->backend();
      result.bytes_sent = dist_->bytes_sent();
      result.bytes_received = dist_->bytes_received();
    }
    result.wall_time_s = seconds_since(start);
    result.evals = evals_;
    // The lowest averaged rank gets every one's result, for a run directory that is not shared
    // (not in a simulation: its caller holds every rank's result already).
    if (dist_ && !final_ranks_.empty() && !options_.transport) {
      result.gathered = dist_->gather_results(final_ranks_, peer_json(result));
    }
    return result;
  }

 private:
  // data.shuffle: the trades of this rank's shard, or null without them.
  static std::unique_ptr<SampleShuffle> make_shuffle(const ExperimentConfig& config,
                                                     const nn::Dataset& train, int rank) {
    if (config.data.shuffle.fraction <= 0) return nullptr;
    const auto shards = nn::partition_all(train.labels, train.classes, config.world.size,
                                          config.data, config.run.seed);
    std::int64_t smallest = train.size;
    for (const auto& s : shards) smallest = std::min<std::int64_t>(smallest, static_cast<std::int64_t>(s.size()));
    const std::int64_t per_peer = (train.size + config.world.size - 1) / config.world.size;
    const std::int64_t batch = config.train.batch_size;
    return std::make_unique<SampleShuffle>(train, shards[static_cast<std::size_t>(rank)], smallest,
                                           config, rank, (per_peer + batch - 1) / batch);
  }

  std::chrono::milliseconds recv_timeout() const {
    return std::chrono::milliseconds(config_.transport.recv_timeout_ms);
  }

  void restore_shuffle(const std::filesystem::path& file, const ResumeState& s) {
    const auto it = s.extra.find("murmur.data.shuffle_origin");
    if (it == s.extra.end()) {
      throw CheckpointError(file.string() + ": no murmur.data.shuffle_origin (data.shuffle's shard)");
    }
    std::vector<std::int64_t> origin;
    try {
      origin = nlohmann::json::parse(it->second).get<std::vector<std::int64_t>>();
    } catch (const nlohmann::json::exception& e) {
      throw CheckpointError(fmt::format("{}: murmur.data.shuffle_origin: {}", file.string(), e.what()));
    }
    shuffle_->restore(origin);
  }

  static std::shared_ptr<const nn::Dataset> load(const ExperimentConfig& config, bool train) {
    return std::make_shared<const nn::Dataset>(nn::load_dataset(config.data, config.run.seed, train));
  }

  double epoch() const { return plan_->epoch_at(step_); }

  // A neighbor lost in an exchange: if this peer got a stop signal too, the neighbor stopped on
  // the same Ctrl-C first and closed its connections before this peer's signal arrived, and
  // this peer stops with a checkpoint as well (the caller leaves its loop); else rethrows the
  // exception being handled. Call it from a catch (const PeerLost&) only.
  void neighbor_stopped_first(const PeerLost& e) {
    if (!stop_requested_within(kStopGrace)) throw;  // called in the handler: the original
    log().warn("rank {}: a neighbor stopped first: {}", rank_, e.what());
  }
  device::Device& dev() { return on_device_->device(); }

  void log_step(double loss, double lr, double rate, Clock::time_point start) {
    const double elapsed = seconds_since(start);
    metrics_.write({{"kind", "step"}, {"rank", rank_}, {"step", step_}, {"epoch", epoch()},
                    {"time_s", elapsed}, {"loss", loss}, {"lr", lr}, {"samples_per_s", rate},
                    {"bytes_sent", dist_ ? dist_->bytes_sent() : 0},
                    {"bytes_received", dist_ ? dist_->bytes_received() : 0},
                    {"compute_s", compute_s_}, {"comm_s", comm_s_}, {"wait_s", wait_s_}});
    const double eta = (total_steps_ - step_) * elapsed / std::max<std::int64_t>(1, step_ - first_step_);
    progress_.update(fmt::format("rank {} epoch {:.2f}/{} step {}/{} loss {:.4f} {:.0f} samples/s ETA {}",
                                 rank_, epoch(), config_.train.epochs, step_, total_steps_, loss,
                                 rate, format_eta(eta)));
  }

  void take_comm_stats() {
    const optimizers::AveragingStats st = dist_->take_stats();
    comm_s_ += st.comm_s;
    wait_s_ += st.wait_s;
  }

  // Runs `fn` with the model this peer stands for in the parameters: push-sum's x / w where the
  // algorithm keeps one, else the parameters as they are.
  template <class Fn>
  auto with_model(Fn fn) {
    if (!dist_) return fn();
    dist_->flush();
    take_comm_stats();
    dev().copy(saved_.span(), params_);
    if (!dist_->debiased(params_)) return fn();
    auto result = fn();
    dev().copy(params_, saved_.span());
    return result;
  }

  Evaluation log_eval(Clock::time_point start) {
    last_eval_ = with_model([&] { return on_device_->evaluate(test_, config_.eval.batch_size); });
    // unix_s: one clock for all peers, for the run's time to accuracy.
    const EvalPoint point{step_, last_eval_.accuracy, seconds_since(start), unix_seconds(),
                          dist_ ? dist_->bytes_sent() : 0};
    metrics_.write({{"kind", "eval"}, {"rank", rank_}, {"step", step_}, {"epoch", epoch()},
                    {"time_s", point.time_s}, {"test_loss", last_eval_.loss},
                    {"test_accuracy", last_eval_.accuracy}, {"bytes_sent", point.bytes_sent},
                    {"unix_s", point.unix_s}});
    evals_.push_back(point);  // result.json's too, for a run directory this rank cannot share
    if (!options_.interactive) {
      log().info("rank {}: step {} epoch {:.2f}: test accuracy {:.2f}%, loss {:.4f}", rank_,
                 step_, epoch(), 100 * last_eval_.accuracy, last_eval_.loss);
    }
    return last_eval_;
  }

  // The exact mean of all peers' final models (continue mode: of those alive at the end): the
  // lowest of them evaluates it, rank 0 unless it died; every rank learns the consensus
  // distance. The peer's own parameters are left as they were.
  void final_average(PeerResult& result) {
    const auto t = Clock::now();
    dist_->finish();
    dev().copy(saved_.span(), params_);
    dist_->debiased(params_);
    const FinalAverage avg = dist_->average(params_);
    result.consensus_distance = avg.consensus_distance;
    final_ranks_ = avg.ranks;
    comm_s_ += seconds_since(t);
    if (!avg.ranks.empty() && rank_ == avg.ranks.front()) {
      const Evaluation e = on_device_->evaluate(test_, config_.eval.batch_size);
      result.has_average = true;
      result.average_ranks = avg.ranks;
      result.average_test_accuracy = e.accuracy;
      result.average_test_loss = e.loss;
      log().info("average model: test accuracy {:.2f}%, loss {:.4f}; consensus distance {:.4g}",
                 100 * e.accuracy, e.loss, avg.consensus_distance);
    }
    dev().copy(params_, saved_.span());
  }

  // The resume state's arrays on the device: the optimizer's, then the algorithm's.
  std::vector<std::pair<std::string, std::span<float>>> device_state() {
    std::vector<std::pair<std::string, std::span<float>>> state;
    for (auto& [name, data] : optimizer_->state()) state.emplace_back("optimizer." + name, data);
    if (dist_) {
      for (auto& [name, data] : dist_->averaging().state()) state.emplace_back("algorithm." + name, data);
    }
    return state;
  }

  // device_state() as host memory for a checkpoint: the arrays themselves where the device is
  // the host, else copies in mirrors_ (downloaded iff `download`; upload_state() puts them back).
  std::vector<FlatState> host_state(bool download) {
    std::vector<FlatState> flat;
    auto state = device_state();
    if (dev().host_memory()) {
      for (auto& [name, data] : state) flat.push_back({name, data});
      return flat;
    }
    mirrors_.resize(state.size());
    for (std::size_t k = 0; k < state.size(); ++k) {
      mirrors_[k].resize(state[k].second.size());
      if (download) dev().download(mirrors_[k], state[k].second);
      flat.push_back({state[k].first, mirrors_[k]});
    }
    return flat;
  }

  void upload_state() {
    if (dev().host_memory()) return;
    auto state = device_state();
    for (std::size_t k = 0; k < state.size(); ++k) dev().upload(state[k].second, mirrors_[k]);
  }

  void save(const std::filesystem::path& file) {
    ResumeState s;
    s.step = step_;
    s.loader = loader_.state();
    s.rng = rng_.state();
    s.extra["murmur.optimizer.steps"] = std::to_string(optimizer_->steps());
    // The shard as trades have made it: which sample of the data set each local one is. (A
    // trade still in flight, at a stop, is not applied: the shard stays as it was before it.)
    if (shuffle_) s.extra["murmur.data.shuffle_origin"] = nlohmann::json(shuffle_->origin()).dump();
    if (dist_) {
      dist_->flush();
      for (const auto& [k, v] : dist_->averaging().scalars()) s.extra["murmur.algorithm." + k] = v;
    }
    on_device_->to_host(true);
    const auto flat = host_state(/*download=*/true);
    save_checkpoint(file, model_->params(), model_->buffers(), flat, s, config_json_);
  }

  // The end of training: the model alone in final.safetensors (what a torch user loads with
  // strict=True), and the resume checkpoint of the same step beside it. Each write is atomic,
  // and the resume file goes first, so a crash between the two loses nothing: the run, run
  // again, resumes from the resume file at this step and writes both once more. The other order
  // could leave a model file without its resume state, which load_checkpoint refuses (resuming
  // from it would restart the optimizer unseen): the run would fall back to an older periodic
  // checkpoint and redo the steps since.
  void save_final() {
    save(final_resume_path(dir_));
    save_model(final_model_path(dir_), model_->params(), model_->buffers(), step_, config_json_);
  }

  // The parts of a config that decide what is trained; a checkpoint of another training is
  // never resumed (how it runs: threads, logging, transport, evaluation, may change).
  static nlohmann::json training_part(nlohmann::json config) {
    for (const char* key : {"checkpoint", "eval", "transport"}) config.erase(key);
    for (const char* key : {"threads", "log_every", "out", "on_peer_failure"}) config["run"].erase(key);
    return config;
  }

  void check_same_training(const std::filesystem::path& file, const std::string& saved) {
    nlohmann::json theirs;
    try {
      theirs = nlohmann::json::parse(saved);
    } catch (const nlohmann::json::exception&) {
      throw CheckpointError(file.string() + ": metadata murmur.config is not JSON");
    }
    if (training_part(theirs) != training_part(nlohmann::json::parse(config_json_))) {
      throw ConfigError(fmt::format(
          "{}: this checkpoint belongs to a run with another config (model, data, training or "
          "algorithm differ); use a new --out directory, or --set checkpoint.resume=false",
          file.string()));
    }
  }

  // Loads the newest checkpoint that passes every check; a bad one is logged and skipped.
  void resume() {
    const auto files = list_checkpoints(dir_);
    for (const auto& file : files) {
      try {
        auto flat = host_state(/*download=*/false);
        ResumeState s = load_checkpoint(file, model_->params(), model_->buffers(), flat);
        check_same_training(file, s.config_json);
        step_ = first_step_ = s.step;
        if (shuffle_) restore_shuffle(file, s);
        loader_.restore(s.loader);
        rng_.set_state(s.rng);
        auto it = s.extra.find("murmur.optimizer.steps");
        optimizer_->set_steps(it == s.extra.end() ? s.step : std::stoll(it->second));
        if (dist_) {
          std::map<std::string, std::string> scalars;
          for (const auto& [k, v] : s.extra) {
            if (k.rfind("murmur.algorithm.", 0) == 0) scalars[k.substr(17)] = v;
          }
          dist_->averaging().restore_scalars(scalars);
        }
        on_device_->to_device(true);
        upload_state();
        log().info("rank {}: resumed from {} at step {}", rank_, file.string(), step_);
        return;
      } catch (const CheckpointError& e) {
        log().warn("rank {}: skipping unusable checkpoint: {}", rank_, e.what());
      }
    }
    if (!files.empty()) {
      log().warn("rank {}: no usable checkpoint in {}; starting at step 0", rank_, dir_.string());
    }
  }

  // run.on_peer_failure=continue: a peer whose last run here did not end cleanly (the marker
  // rank<r>/running is still there: it was killed) asks its neighbors to take it back, with
  // their parameters and step (membership/rejoin.h). The marker is written for this run. Every
  // other peer starts level with the rest (Distributed::agree_start).
  void rejoin_if_restarted() {
    const auto marker = dir_ / "running";
    const bool died = std::filesystem::exists(marker);
    std::ofstream(marker) << "this peer is running; left behind if it dies\n";
    if (!dist_) return;
    if (died && dist_->live()) {
      log().warn("rank {}: the last run of this peer did not end cleanly; rejoining", rank_);
      step_ = first_step_ = dist_->rejoin(step_);
      return;
    }
    // Starting with the others: from the step of whoever checkpointed earliest.
    const std::int64_t agreed = dist_->agree_start(step_);
    if (agreed != step_) {
      log().warn("rank {}: going on from step {}, where the peer furthest behind stopped "
                 "(this one's checkpoint is of step {})", rank_, agreed, step_);
    }
    step_ = first_step_ = agreed;
  }

  const ExperimentConfig& config_;
  const PeerOptions& options_;
  StepHooks hooks_;
  int rank_;
  std::filesystem::path dir_;
  std::shared_ptr<const nn::Dataset> train_holder_;
  std::shared_ptr<const nn::Dataset> test_holder_;
  const nn::Dataset& train_;
  const nn::Dataset& test_;
  // Before loader_, which reads its shard, and dist_, whose transport must go first.
  std::unique_ptr<SampleShuffle> shuffle_;
  nn::BatchLoader loader_;
  Rng rng_;
  MetricsSink metrics_;
  ProgressLine progress_;
  std::unique_ptr<nn::Model> model_;           // the host model: the network, checkpoints
  std::unique_ptr<DeviceModel> on_device_;     // run.device's twin (the host model on cpu)
  std::span<float> params_, grads_;            // on_device_'s arenas
  device::Array saved_;  // the raw parameters while a debiased or average model is in place
  std::unique_ptr<Distributed> dist_;
  std::unique_ptr<optimizers::LocalOptimizer> optimizer_;
  std::vector<std::vector<float>> mirrors_;    // off-host devices: the resume state's host copies
  std::unique_ptr<optimizers::LrSchedule> schedule_;
  std::vector<float> x_;
  std::vector<std::int32_t> y_;
  std::string config_json_;
  std::optional<BatchPlan> plan_;
  std::function<void(std::size_t)> grads_ready_;  // set iff the gradients are averaged
  std::int64_t total_steps_ = 0;
  std::int64_t step_ = 0;
  std::int64_t first_step_ = 0;
  double compute_s_ = 0;
  double comm_s_ = 0;
  double wait_s_ = 0;
  Evaluation last_eval_;
  std::vector<EvalPoint> evals_;  // every evaluation of this run, as log_eval wrote it
  std::vector<int> final_ranks_;  // the final average's ranks, lowest first; empty before it
};

}  // namespace

std::vector<std::string> check_config(const ExperimentConfig& config) {
  validate(config);
  check_device(config);
  nn::check_model(config.model, config.data);
  membership::is_live(config.run.on_peer_failure);
  return optimizers::check_algorithm(config.algorithm, config.topology, config.world.size,
                                     config.run.seed);
}

int default_threads(const RunConfig& run, int local_peers) {
  if (run.threads > 0) return run.threads;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_peers));
}

PeerResult run_peer(const ExperimentConfig& config, const PeerOptions& options) {
  const int rank = std::max(0, config.world.rank);
  const auto warnings = check_config(config);
  if (rank == 0) {
    for (const std::string& warning : warnings) log().warn("{}", warning);
  }
  if (options.install_signal_handlers) install_stop_handlers();
  // One pool per process: simulated peers (threads of one process) all ask for the same size,
  // so only the first call changes anything.
  const int threads = default_threads(config.run, options.local_peers);
  if (nn::cpu::compute_threads() != threads) nn::cpu::set_compute_threads(threads);
  std::filesystem::create_directories(options.out / fmt::format("rank{}", rank));
  StepHooks hooks = options.hooks;
  if (auto straggler = straggler_hook(config.network, rank, options.cpu_cgroup)) hooks.push_back(std::move(straggler));
  Trainer trainer(config, options, std::move(hooks));
  return trainer.run();
}

}  // namespace murmur::runtime
