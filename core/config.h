// The typed configuration of one murmur run. YAML is parsed once, at the edge, by
// core/config_yaml.cc (the only file that includes yaml-cpp); every room receives only its
// own struct. Each struct is described once by a `describe(visitor, struct)` function: the
// YAML loader, the `--set key=value` overrides and the writer of the resolved config all walk
// the same description, so a field added here is loaded, validated and written everywhere.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace murmur {

// Constraints a visitor checks after reading a field. Range bounds a number; Registered makes a
// string one of the names the room that owns the key registered for it (core/names.h), so this
// file lists no name of a room above core.
struct Range {
  double min = -1e300;
  double max = 1e300;
};
struct Registered {};

struct RunConfig {
  std::string name = "murmur";
  std::uint64_t seed = 0;
  std::string out;             // run directory; "" = runs/<name>
  int log_every = 100;         // steps between metric lines
  int threads = 0;             // compute threads per peer; 0 = this machine's cores / local peers
  std::string device = "cpu";  // runtime/device_model.h: cpu, cuda
  std::string on_peer_failure = "stop";  // membership/neighborhood.h: stop, or continue
};
template <class V>
void describe(V& v, RunConfig& c) {
  v("name", c.name);
  v("seed", c.seed);
  v("out", c.out);
  v("log_every", c.log_every, Range{1, 1e9});
  v("threads", c.threads, Range{0, 1024});
  v("device", c.device, Registered{});
  v("on_peer_failure", c.on_peer_failure, Registered{});
}

struct ModelConfig {
  std::string name = "mlp";                // nn/model.h
  std::vector<int> hidden = {512, 256};    // mlp hidden widths
  double dropout = 0.0;                    // mlp: dropout after each hidden ReLU
};
template <class V>
void describe(V& v, ModelConfig& c) {
  v("name", c.name, Registered{});
  v("hidden", c.hidden, Range{1, 1 << 20});
  v("dropout", c.dropout, Range{0, 0.99});
}

struct SyntheticConfig {
  int train_size = 4096;
  int test_size = 1024;
  int classes = 10;
  int height = 8;   // images are 1 x height x width
  int width = 8;
  double noise = 1.0;  // std of the Gaussian noise around each class centre
};
template <class V>
void describe(V& v, SyntheticConfig& c) {
  v("train_size", c.train_size, Range{1, 1e8});
  v("test_size", c.test_size, Range{1, 1e8});
  v("classes", c.classes, Range{2, 1000});
  v("height", c.height, Range{1, 4096});
  v("width", c.width, Range{1, 4096});
  v("noise", c.noise, Range{0, 1e6});
}

// GossipGraD's asynchronous distributed sample shuffle (Daily et al. 2018; runtime/
// sample_shuffle.h): every every_steps steps each peer sends `fraction` of the smallest shard's
// size in samples to a partner that rotates over a hypercube-like schedule, receives as many
// from another, and trains on them in place of those it sent, while the next steps run.
struct ShuffleConfig {
  double fraction = 0;          // of the smallest shard, per round; 0: off
  std::int64_t every_steps = 0; // steps between rounds; 0: one round per epoch
};
template <class V>
void describe(V& v, ShuffleConfig& c) {
  v("fraction", c.fraction, Range{0, 1});
  v("every_steps", c.every_steps, Range{0, 1e12});
}

struct DataConfig {
  std::string name = "fashion_mnist";  // nn/dataset.h
  std::string path = "/usr/share/datasets/fashion-mnist";
  std::string partition = "iid";       // nn/partition.h
  double dirichlet_alpha = 1.0;
  bool normalize = true;               // (x/255 - mean) / std
  double mean = 0.2860;
  double std = 0.3530;
  SyntheticConfig synthetic;
  ShuffleConfig shuffle;
};
template <class V>
void describe(V& v, DataConfig& c) {
  v("name", c.name, Registered{});
  v("path", c.path);
  v("partition", c.partition, Registered{});
  v("dirichlet_alpha", c.dirichlet_alpha, Range{1e-6, 1e9});
  v("normalize", c.normalize);
  v("mean", c.mean);
  v("std", c.std, Range{1e-12, 1e9});
  v("synthetic", c.synthetic);
  v("shuffle", c.shuffle);
}

struct OptimizerConfig {
  std::string name = "sgd";  // optimizers/local_optimizer.h
  double lr = 0.05;
  double momentum = 0.9;     // sgd and lars; 0 = plain SGD
  bool nesterov = false;     // sgd and lars
  double weight_decay = 0.0; // sgd: L2 added to the gradient; adamw: decoupled
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double trust_coefficient = 0.001;  // lars: eta in eta ||w|| / (||g|| + wd ||w||) per tensor
};
template <class V>
void describe(V& v, OptimizerConfig& c) {
  v("name", c.name, Registered{});
  v("lr", c.lr, Range{0, 1e6});
  v("momentum", c.momentum, Range{0, 0.999999});
  v("nesterov", c.nesterov);
  v("weight_decay", c.weight_decay, Range{0, 1e3});
  v("beta1", c.beta1, Range{0, 0.999999});
  v("beta2", c.beta2, Range{0, 0.999999999});
  v("eps", c.eps, Range{0, 1});
  v("trust_coefficient", c.trust_coefficient, Range{1e-9, 1e3});
}

struct ScheduleConfig {
  std::string name = "cosine";  // optimizers/lr_schedule.h
  int warmup_steps = 0;         // linear warm-up from 0 to lr, then the schedule
  int step_every = 1000;        // step: multiply by gamma every this many steps
  double gamma = 0.1;
  double min_lr = 0.0;          // cosine: the lr at the last step
  // optimizer.lr is scaled by the global batch (batch_size * world.size) over reference_batch:
  // "none", "linear" (Goyal et al. 2017) or "sqrt"; reference_batch 0 = batch_size.
  std::string scale_rule = "none";
  int reference_batch = 0;
};
template <class V>
void describe(V& v, ScheduleConfig& c) {
  v("name", c.name, Registered{});
  v("warmup_steps", c.warmup_steps, Range{0, 1e9});
  v("step_every", c.step_every, Range{1, 1e9});
  v("gamma", c.gamma, Range{0, 1});
  v("min_lr", c.min_lr, Range{0, 1e6});
  v("scale_rule", c.scale_rule, Registered{});
  v("reference_batch", c.reference_batch, Range{0, 1 << 30});
}

// Growing the batch instead of decaying the rate (Smith et al. 2018): each peer's batch is
// batch_size * factor^floor(epoch / every_epochs), rounded, at most max_batch (0 = no cap).
struct BatchRampConfig {
  double factor = 1.0;  // 1 = off
  int every_epochs = 1;
  int max_batch = 0;
};
template <class V>
void describe(V& v, BatchRampConfig& c) {
  v("factor", c.factor, Range{1, 1e3});
  v("every_epochs", c.every_epochs, Range{1, 1e6});
  v("max_batch", c.max_batch, Range{0, 1 << 20});
}

struct TrainConfig {
  int epochs = 5;         // epochs over the whole data set, summed over all peers
  int batch_size = 64;    // per peer
  std::int64_t max_steps = 0;  // 0 = no limit; else stop after this many local steps
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  BatchRampConfig batch_ramp;
};
template <class V>
void describe(V& v, TrainConfig& c) {
  v("epochs", c.epochs, Range{1, 1e6});
  v("batch_size", c.batch_size, Range{1, 1 << 20});
  v("max_steps", c.max_steps, Range{0, 1e15});
  v("optimizer", c.optimizer);
  v("schedule", c.schedule);
  v("batch_ramp", c.batch_ramp);
}

struct EvalConfig {
  int every_steps = 0;     // 0 = at the end of each epoch
  int batch_size = 1000;
  double target_accuracy = 0;  // time and bytes until the slowest peer first reaches it; 0 = none
};
template <class V>
void describe(V& v, EvalConfig& c) {
  v("every_steps", c.every_steps, Range{0, 1e9});
  v("batch_size", c.batch_size, Range{1, 1 << 20});
  v("target_accuracy", c.target_accuracy, Range{0, 1});
}

struct CheckpointConfig {
  int every_steps = 0;  // 0 = only the final checkpoint
  int keep = 2;         // periodic checkpoints kept (the final one is always kept)
  bool resume = true;   // resume from the latest good checkpoint in the run directory
};
template <class V>
void describe(V& v, CheckpointConfig& c) {
  v("every_steps", c.every_steps, Range{0, 1e9});
  v("keep", c.keep, Range{1, 1000});
  v("resume", c.resume);
}

struct WorldConfig {
  int size = 1;    // number of peers
  int rank = -1;   // -1 = from MURMUR_RANK, SLURM_PROCID or OMPI_COMM_WORLD_RANK
  // The ranks of one node (algorithm.hierarchical): 0 = the launcher's local size
  // (MURMUR_LOCAL_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE). Ranks r*k .. r*k+k-1 make node r.
  int ranks_per_node = 0;
};
template <class V>
void describe(V& v, WorldConfig& c) {
  v("size", c.size, Range{1, 1 << 20});
  v("rank", c.rank, Range{-1, 1 << 20});
  v("ranks_per_node", c.ranks_per_node, Range{0, 1 << 20});
}

struct TransportConfig {
  std::string backend = "tcp";          // transport/factory.h
  // Where this peer listens: an IPv4 address, or "auto": that of `interface` (or
  // $MURMUR_SOCKET_IFNAME), loopback when the whole world is on this host, else the default
  // route's interface, else the host name's address (transport/address.h).
  std::string host = "auto";
  std::string interface;                // NCCL_SOCKET_IFNAME syntax: "eth,ib", "=eth0", "^docker"
  int port = 0;                         // 0 = any free port (published by rendezvous)
  std::vector<std::string> peers;       // static list "host:port", one per rank
  std::string hostfile;                 // or a file with one "host:port" per line
  std::string rendezvous_dir;           // or a shared directory of address files
  // How ranks meet: "auto" takes the first of peers, hostfile, rendezvous_dir that is set;
  // "hosts" derives every address from the ordered host list (`hosts`, else $MURMUR_HOSTS, else
  // Slurm's step) and base_port + local rank: no file, no coordinator (transport/host_list.h).
  std::string rendezvous = "auto";
  std::vector<std::string> hosts;       // rendezvous hosts: each rank's host in rank order, "name*N"
  int base_port = 29700;                // rendezvous hosts: local rank k listens on base_port + k
  int connect_timeout_ms = 30000;
  int recv_timeout_ms = 60000;
  // run.on_peer_failure=continue: a neighbor silent this long (or whose connection closes) is
  // dropped from the mixing weights and the run goes on without it. On tcp, silent means not
  // even a heartbeat (sent every fifth of this, at most every second) arrives: a live neighbor
  // that is slow to send its message is waited for, up to recv_timeout_ms.
  int peer_timeout_ms = 10000;
  std::int64_t max_frame_bytes = std::int64_t{1} << 30;
  std::int64_t chunk_bytes = std::int64_t{1} << 20;  // pipelining unit of large transfers
  // tcp: how long the I/O thread keeps polling its sockets after the last event before it sleeps
  // in epoll_wait. A sleeping thread is woken by the next segment, which in a VM costs tens of
  // microseconds each time; 0 sleeps at once.
  int poll_spin_us = 50;
  std::string secret_file;              // shared secret for the handshake
  std::string secret_env = "MURMUR_SECRET";
  std::string ofi_provider = "tcp";     // tcp | shm | verbs | ...
  // UCX error mode PEER: a dead peer is PeerLost, but UCX 1.13 then rules out its posix/sysv
  // shared memory (only cma, tcp). false = mode NONE: shared memory allowed, a dead peer is seen
  // only as a timeout.
  bool ucx_peer_failure = true;
};
template <class V>
void describe(V& v, TransportConfig& c) {
  v("backend", c.backend, Registered{});
  v("host", c.host);
  v("interface", c.interface);
  v("port", c.port, Range{0, 65535});
  v("peers", c.peers);
  v("hostfile", c.hostfile);
  v("rendezvous_dir", c.rendezvous_dir);
  v("rendezvous", c.rendezvous, Registered{});
  v("hosts", c.hosts);
  v("base_port", c.base_port, Range{1, 65535});
  v("connect_timeout_ms", c.connect_timeout_ms, Range{1, 1e9});
  v("recv_timeout_ms", c.recv_timeout_ms, Range{1, 1e9});
  v("peer_timeout_ms", c.peer_timeout_ms, Range{1, 1e9});
  v("max_frame_bytes", c.max_frame_bytes, Range{64, 1e12});
  v("chunk_bytes", c.chunk_bytes, Range{4096, 1e12});
  v("poll_spin_us", c.poll_spin_us, Range{0, 1e6});
  v("secret_file", c.secret_file);
  v("secret_env", c.secret_env);
  v("ofi_provider", c.ofi_provider);
  v("ucx_peer_failure", c.ucx_peer_failure);
}

// An emulated network for runs on one machine (tools/murmur_netem, started by murmur-launch):
// every peer in its own network namespace, its link shaped by tc. Strings are tc's spellings
// ("1gbit", "100mbit", "5ms", "0.1%"); "" leaves that property unshaped. Stragglers (rank ->
// factor f) compute f times slower (runtime/step_hook.h): in "quota" mode murmur-launch gives
// every local peer a CPU quota of its share of the cores (cgroups) and a straggler 1/f of that;
// in "sleep" mode a straggler sleeps (f - 1) x its compute time per step (and its sleep hands the
// cores to the others). straggler_steps [from, to] makes them slow from step `from` up to, not
// including, step `to` (steps count from 1); empty: the whole run.
struct NetworkConfig {
  std::string bandwidth;          // per peer and direction, e.g. "1gbit"
  std::string latency;            // one-way delay between two peers, e.g. "5ms"
  std::string jitter;             // +- around the latency, e.g. "1ms"
  std::string loss;               // per direction, e.g. "0.1%"
  std::map<int, double> stragglers;  // rank -> compute slow-down factor (>= 1)
  std::string straggler_mode = "quota";  // quota, or sleep
  std::vector<int> straggler_steps;      // [from, to]: a straggler that comes and goes
};
template <class V>
void describe(V& v, NetworkConfig& c) {
  v("bandwidth", c.bandwidth);
  v("latency", c.latency);
  v("jitter", c.jitter);
  v("loss", c.loss);
  v("stragglers", c.stragglers, Range{1, 1e6});
  v("straggler_mode", c.straggler_mode);
  v("straggler_steps", c.straggler_steps, Range{0, 2e9});
}

struct TopologyConfig {
  std::string graph = "ring";           // topology/registry.h (murmur-topo --list)
  std::string weights = "uniform";      // topology/registry.h
  int k = 1;                            // the random out-degree graph: out-degree per round
  std::vector<std::vector<int>> edges;  // a custom graph: [from, to] pairs
  bool directed = false;                // a custom graph: edges are one-way
  std::vector<std::vector<double>> matrix;  // custom weights: the full mixing matrix
};
template <class V>
void describe(V& v, TopologyConfig& c) {
  v("graph", c.graph, Registered{});
  v("weights", c.weights, Registered{});
  v("k", c.k, Range{1, 1 << 20});
  v("edges", c.edges);
  v("directed", c.directed);
  v("matrix", c.matrix);
}

struct CompressorConfig {
  std::string name = "none";  // optimizers/compressor.h
  double ratio = 0.01;        // topk / randomk: fraction of entries kept
  int levels = 16;            // qsgd: quantization levels s
  int bucket = 512;           // qsgd: entries quantized against one norm (0: the whole vector)
  std::string rounding = "nearest";  // fp16, bf16: nearest (even), or stochastic
};
template <class V>
void describe(V& v, CompressorConfig& c) {
  v("name", c.name, Registered{});
  v("ratio", c.ratio, Range{1e-9, 1});
  v("levels", c.levels, Range{1, 1 << 20});
  v("bucket", c.bucket, Range{0, 1 << 30});
  v("rounding", c.rounding, Registered{});
}

// allreduce with average = gradients: Deep Gradient Compression (Lin et al. 2018,
// optimizers/dgc.h): each peer sends the top density of its accumulated gradient, momentum
// corrected, through the sparse allreduce (transport/sparse_allreduce.h).
struct SparsifyConfig {
  std::string name = "none";       // none, dgc
  double density = 0.001;          // fraction of the gradient sent each step, after the warm-up
  std::int64_t warmup_steps = 0;   // density 25%, 6.25%, 1.56%, 0.39% in quarters of these
  double clip_norm = 0;            // local gradient clipping at clip_norm / sqrt(peers); 0: off
};
template <class V>
void describe(V& v, SparsifyConfig& c) {
  v("name", c.name, Registered{});
  v("density", c.density, Range{1e-9, 1});
  v("warmup_steps", c.warmup_steps, Range{0, 1e15});
  v("clip_norm", c.clip_norm, Range{0, 1e9});
}

// allreduce and dpsgd (and local_sgd, diloco, which average as allreduce does): the format of
// the parameters or gradients on the wire (transport/half_ring_allreduce.h), every sum taken in
// fp32. fp16 or bf16 halve the bytes.
struct WireConfig {
  std::string format = "fp32";         // fp32, fp16, bf16
  std::string rounding = "nearest";    // fp16, bf16: nearest (even), or stochastic
};
template <class V>
void describe(V& v, WireConfig& c) {
  v("format", c.format, Registered{});
  v("rounding", c.rounding, Registered{});
}

struct AlgorithmConfig {
  std::string name = "none";    // optimizers/algorithm.h (murmur-topo --list)
  int local_steps = 1;          // H: local steps between averaging rounds
  std::int64_t switch_step = 0; // local_sgd: post-local SGD, allreduce every step before this
  bool overlap = false;         // average on the communication thread during the next step
  int tau = 0;                  // sgp overlap: messages may be up to tau steps late
  bool one_sided = false;       // sgp: messages written into the receivers' windows (put)
  // dpsgd: a peer runs up to this many rounds ahead of its slowest in-neighbor (0: lockstep)
  int max_staleness = 0;
  double outer_lr = 0.7;        // diloco outer Nesterov
  double outer_momentum = 0.9;
  double consensus_lr = 1.0;    // choco gamma
  double elastic_beta = 0.9;    // easgd: Zhang et al.'s beta = p alpha, the center's moving rate
  // dpsgd, allreduce: exact average within each node first, then the algorithm between nodes
  // (one leader per node, the graph over nodes), then the result shared within the node.
  bool hierarchical = false;
  // allreduce: what is averaged, "params" after the local step, or "gradients" before it (as
  // DDP): in buckets of bucket_mb MiB that, with overlap, start while backward still runs.
  std::string average = "params";
  double bucket_mb = 1.0;
  SparsifyConfig sparsify;      // allreduce with average = gradients: DGC
  WireConfig wire;              // 16-bit messages with fp32 sums
  CompressorConfig compressor;
};
template <class V>
void describe(V& v, AlgorithmConfig& c) {
  v("name", c.name, Registered{});
  v("local_steps", c.local_steps, Range{1, 1e9});
  v("switch_step", c.switch_step, Range{0, 1e15});
  v("overlap", c.overlap);
  v("tau", c.tau, Range{0, 1000});
  v("one_sided", c.one_sided);
  v("max_staleness", c.max_staleness, Range{0, 64});
  v("outer_lr", c.outer_lr, Range{0, 1e3});
  v("outer_momentum", c.outer_momentum, Range{0, 0.999999});
  v("consensus_lr", c.consensus_lr, Range{0, 1});
  v("elastic_beta", c.elastic_beta, Range{0, 1});
  v("hierarchical", c.hierarchical);
  v("average", c.average, Registered{});
  v("bucket_mb", c.bucket_mb, Range{1e-6, 1e6});
  v("sparsify", c.sparsify);
  v("wire", c.wire);
  v("compressor", c.compressor);
}

struct ExperimentConfig {
  RunConfig run;
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  EvalConfig eval;
  CheckpointConfig checkpoint;
  WorldConfig world;
  TransportConfig transport;
  TopologyConfig topology;
  AlgorithmConfig algorithm;
  NetworkConfig network;
};
template <class V>
void describe(V& v, ExperimentConfig& c) {
  v("run", c.run);
  v("model", c.model);
  v("data", c.data);
  v("train", c.train);
  v("eval", c.eval);
  v("checkpoint", c.checkpoint);
  v("world", c.world);
  v("transport", c.transport);
  v("topology", c.topology);
  v("algorithm", c.algorithm);
  v("network", c.network);
}

// Reads a YAML file into a config, starting from the defaults above. Throws ConfigError naming
// "file:line: key.path: problem" for an unknown key, a wrong type or an out-of-range value.
ExperimentConfig load_config(const std::filesystem::path& file);
// The same from YAML text; `origin` stands for the file name in messages.
ExperimentConfig load_config_string(std::string_view yaml, std::string_view origin);
// Applies one "dotted.key=value" override (the value is parsed as YAML), with the same checks.
// Throws ConfigError("--set train.epochs=x: ...").
void apply_override(ExperimentConfig& config, std::string_view assignment);
// Cross-field rules that no single field can check (e.g. cnn needs 28x28 images).
void validate(const ExperimentConfig& config);
// The resolved config, for the run directory and summary.json.
nlohmann::json to_json(const ExperimentConfig& config);
std::string to_yaml(const ExperimentConfig& config);

}  // namespace murmur
