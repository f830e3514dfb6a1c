// murmur/murmur.h: the whole API a program needs to train a model of its own with murmur's
// averaging algorithms, topologies, transports and fault handling, the configs of configs/
// included.
//
// A Communicator is one peer of a run. It reads the run's config (a file, YAML text, or what
// murmur-launch hands it), learns its rank and the world from the launcher's environment as
// murmur-peer does (murmur-launch, srun, mpirun), and meets the other peers. The program hands it
// its parameters once (attach), and after each of its own optimizer steps calls after_step():
// the configured algorithm averages the parameters with this round's neighbors, in place. At the
// end, average() leaves the exact mean of all peers' models in the parameters and finish() writes
// the run directory as murmur-peer does (metrics.jsonl, result.json, summary.json), so
// murmur-launch, murmur-sweep and their reports read it alike.
//
//   murmur::Communicator comm({.config_file = "configs/ring.yaml"});
//   comm.attach({{params.data(), params.size()}});
//   for (step = 1; ...) { local_sgd_step(params); comm.after_step(step); }
//   comm.average();
//   comm.finish({.accuracy = evaluate(params)});
//
// Errors are exceptions derived from murmur::Error (core/error.h): a bad config names its
// file, line and key (ConfigError), a lost peer its rank (PeerLost). Not thread-safe: one thread
// calls a Communicator (an algorithm with overlap runs its own communication thread inside).
// One Communicator per process.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace murmur {

// Where a buffer's floats live.
enum class Memory { kHost, kCuda };

// float32 memory of the program's: `count` floats at `data`, in host memory or on CUDA device
// `device` (never touched by the CPU then).
struct Buffer {
  float* data = nullptr;
  std::size_t count = 0;
  Memory memory = Memory::kHost;
  int device = 0;
};

struct Options {
  // The config: `config_yaml` (YAML text) if given, else the file `config_file`, else the file
  // that murmur-launch names in $MURMUR_CONFIG, else the defaults of core/config.h.
  std::string config_file;
  std::string config_yaml;
  // "key=value" overrides (the value is YAML), after the config's own; murmur-launch's --set
  // ($MURMUR_SET, a JSON list) come after these.
  std::vector<std::string> overrides;
  // The run directory: "" = $MURMUR_OUT (murmur-launch's --out), else run.out, else
  // runs/<run.name>.
  std::string out;
  // SIGINT and SIGTERM ask the peer to stop (stop_requested()) instead of ending the process:
  // the program checkpoints at its next step boundary, as murmur-peer does.
  bool handle_signals = true;
  // Sets this process's OpenBLAS threads (shared with numpy and torch where they use the same
  // library, as Debian's do) to its share of the node's cores: run.threads, else the cores over
  // the peers on this node, as murmur-peer does.
  bool size_threads = true;
  // kCuda parameters: the cudaStream_t the program's kernels run on, so that murmur's ops are
  // ordered with them; null = a stream of murmur's own, with a synchronization around each call.
  void* cuda_stream = nullptr;
  // The name in log lines ("peer 2"); "" = "peer <rank>".
  std::string log_name;
};

// This peer's figures so far.
struct Stats {
  std::int64_t step = 0;           // the last step given to after_step()
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  double compute_s = 0;  // between after_step() calls: the program's own work
  double comm_s = 0;     // inside murmur's averaging calls
  double wait_s = 0;     // the part of comm_s spent waiting for neighbors
};

// One evaluation of a model on the program's test data; NaN where not measured.
struct Evaluation {
  double accuracy = NAN;
  double loss = NAN;
};

// The exact average at the end of a run.
struct Average {
  double consensus_distance = 0;  // the mean over peers of ||x_i - mean||_2, before
  std::vector<int> ranks;         // the peers averaged: all, or those alive (continue mode)
  bool evaluator = false;         // true on the lowest of them: its finish() reports the average
};

// One rank's share of a round's mixing matrix W (x_i <- sum_j W_ij x_j): the weight of its own
// value, the ranks it takes values from and their weights (W's row), and the ranks it sends to
// with their weights (W's column).
struct Neighbors {
  double self_weight = 1;
  std::vector<int> recv_from;
  std::vector<double> recv_weights;
  std::vector<int> send_to;
  std::vector<double> send_weights;
};

class [[gnu::visibility("default")]] Communicator {
 public:
  // Resolves the config and this peer's place in the world, and meets the other peers (blocks
  // until they answer, or transport.connect_timeout_ms passes). Throws ConfigError, PeerLost.
  explicit Communicator(const Options& options = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int world_size() const;
  int local_rank() const;  // among the peers of this node (GPU = local_rank % devices)
  int local_size() const;  // the peers of this node, which share its cores
  // This peer's share of the node's cores: run.threads, else the cores over local_size().
  int compute_threads() const;
  // The resolved config as JSON (every section, the defaults filled in).
  std::string config_json() const;
  // The run directory; this peer writes under rank<r>/ there.
  std::string out() const;

  // Hands murmur the model's parameters, every peer the same: one flat buffer, or several
  // (copied into one arena of murmur's around each averaging, so one flat buffer is faster).
  // Each `description` line names a tensor ("conv1.weight [16, 1, 3, 3] float32"), as many as
  // the buffers hold; without them, each buffer's size stands for it. Every peer must call it: the peers check that their
  // descriptions agree with rank 0's and refuse on every rank with a ConfigError naming the first
  // difference. The buffers must stay allocated, in place, until finish() (or the
  // Communicator's end, when finish() is never called); after finish() murmur no longer
  // touches them.
  void attach(std::span<const Buffer> parameters, std::span<const std::string> description = {});

  // The step to go on from when peers resume from checkpoints: the lowest of every peer's
  // `step`. Every peer calls it, after attach() and before its first after_step().
  std::int64_t agree_start(std::int64_t step);

  // After the program's optimizer step `step` (1, 2, ...): the algorithm's averaging of the
  // parameters. `loss` and `samples` (this step's batch) go into metrics.jsonl, one line every
  // run.log_every steps. Throws PeerLost when a neighbor is lost (unless run.on_peer_failure is
  // continue); when it was lost because a stop signal reached the run, returns instead, with
  // stop_requested() true.
  void after_step(std::int64_t step, double loss = NAN, std::int64_t samples = 0);
  // Completes the averaging in flight (algorithm.overlap), so that the parameters hold this
  // peer's model: before evaluating it or saving it.
  void flush();

  // An evaluation of this peer's model at the last step: an eval line in metrics.jsonl, and a
  // point of the run's time to accuracy. `epoch` is the program's count, for the record.
  void log_eval(const Evaluation& evaluation, double epoch = NAN);

  // The end: replaces the parameters by the exact mean of every peer's (continue mode: of the
  // peers alive, which agree on who). Every peer calls it.
  Average average();
  // Writes this peer's result.json (its last log_eval, the figures) and, after average(), sends
  // it to the lowest averaged rank, whose finish() also reports `average_model` (the program's
  // evaluation of the averaged parameters) and writes every rank's result and, when
  // murmur-launch did not start the run, summary.json. Every peer calls it, once.
  void finish(const Evaluation& average_model = {});

  Stats stats() const;
  // True once SIGINT or SIGTERM arrived (Options::handle_signals); the signal, 0 if none.
  bool stop_requested() const;
  int stop_signal() const;

  // ---- primitives, for programs that write their own averaging; every peer calls the same
  // sequence of them with buffers of the same sizes. Each completes the averaging in flight
  // first. A world of one peer leaves the buffer as it is.
  // One gossip round over topology.graph: x <- sum_j W_ij x_j with this call's round of the
  // schedule (each call is the next round); W's rows must sum to 1 (ConfigError otherwise).
  // Every peer passes a buffer of the same size: a neighbor's message of another size is a
  // ProtocolError naming it.
  void neighbor_average(Buffer x);
  // x <- the sum (or, with `mean`, the mean) of x over every peer.
  void allreduce(Buffer x, bool mean = true);
  // x <- rank `root`'s x, on every peer (e.g. the initial parameters, as DDP starts).
  void broadcast(Buffer x, int root = 0);
  // Returns once every peer has called it.
  void barrier();
  // This rank's share of round `round`'s mixing matrix, as neighbor_average() uses it.
  Neighbors neighbors(std::int64_t round) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace murmur
