// murmur-bench comm: communication figures of each transport backend built, with 2 and 4 ranks
// (forked processes on 127.0.0.1, or threads for inproc) at 64 KiB .. 64 MiB: point-to-point
// bandwidth (rank 0 streams to rank 1; "put": the same written one-sided, where the backend has
// put()), ring-neighbor exchange time per round (every rank sends
// its buffer to left and right and receives theirs), and the algorithm bandwidth (bytes / time,
// as nccl-tests define it) of the ring allreduce ("allreduce") and the halving-doubling one
// ("allreduce_hd") and the direct one ("allreduce_direct", every rank to every other); and the sparse allreduce (SparCML, "sparse") of a vector of the same size
// of which each rank holds `density` nonzeros (one at a random place in each of k equal blocks,
// as DGC's top-k scatters them), with the bytes each rank sent beside the dense ring's
// 2(N-1)/N of the data; and the ring with a 16-bit wire ("allreduce_fp16", "allreduce_bf16",
// algorithm.wire: half the bytes, sums in fp32, a mean of random data so that no value
// overflows). Per row: warm-up, then the mean over timed rounds,
// each round opened by a barrier. tools/bench_mpi runs the same patterns with Open MPI.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/host_memory.h"
#include "tools/bench_comm.h"
#include "tools/bench_registry.h"
#include "core/rng.h"
#include "transport/collectives.h"
#include "transport/half_ring_allreduce.h"
#include "transport/sparse_allreduce.h"
#include "transport/tag.h"
#include "transport/factory.h"
#include "transport/inproc/transport.h"

namespace murmur::tools {
namespace {

using transport::ByteRange;
using transport::Request;
using transport::Transport;
using Clock = std::chrono::steady_clock;

// Enough rounds for ~256 MiB moved per row, at least 3 and at most 50.
int rounds_for(std::int64_t bytes) {
  return static_cast<int>(std::clamp<std::int64_t>((256 << 20) / std::max<std::int64_t>(bytes, 1), 3, 50));
}

void barrier(Transport& t, transport::Allreduce& allreduce, transport::Region& region,
             std::span<float> one) {
  one[0] = 1.0f;
  allreduce.run(region, one, transport::ReduceOp::kSum,
                transport::TagLayout(t).make(transport::purpose::kBenchmark, 1));
}

void wait(Transport& t, Request& r) {
  transport::wait_or_lost(t, r, std::chrono::seconds(60), "a benchmark transfer");
}

// Runs every pattern and size on this rank; rank 0 returns one JSON object per row.
std::vector<nlohmann::json> bench_rank(Transport& t, const std::string& backend,
                                       const CommOptions& o) {
  const int n = t.world_size(), r = t.rank();
  const int left = (r + n - 1) % n, right = (r + 1) % n;
  std::int64_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  // A HostBuffer, as the parameter arena a training step sends (huge pages from 2 MiB up).
  HostBuffer storage = HostBuffer::floats(max_size / sizeof(float) * 3 + 16);
  std::span<float> buffer = storage.as_floats();  // send, from left, from right
  auto region = t.register_region(std::as_writable_bytes(buffer));
  transport::CollectiveOptions copts;
  copts.chunk_bytes = o.chunk_bytes;
  transport::RingAllreduce allreduce(t, copts);
  transport::HalvingDoublingAllreduce halving_doubling(t, copts);
  transport::DirectAllreduce direct(t, copts);
  transport::Allreduce barrier_allreduce(t, copts);  // in log2(N) steps for large worlds
  std::vector<float> one(1);
  auto one_region = t.register_region(std::as_writable_bytes(std::span(one)));
  std::vector<nlohmann::json> rows;
  // --cold: a buffer larger than the last-level cache, written over before each timed round.
  std::vector<std::uint8_t> evict(o.cold ? std::size_t{64} << 20 : 0);
  auto time_rounds = [&](int rounds, auto&& body) {
    // Warm-up (connections, buffers, caches), each round opened by a barrier as the timed ones
    // are and as tools/bench_mpi's are: without it the ranks a pattern leaves idle (p2p's 2 and
    // 3) ran ahead into the next pattern and flooded ranks 0 and 1 while they were timed.
    for (int i = 0; i < 2; ++i) {
      barrier(t, barrier_allreduce, *one_region, one);
      body();
    }
    double total = 0;
    for (int i = 0; i < rounds; ++i) {
      for (std::size_t k = 0; k < evict.size(); k += 64) evict[k] = static_cast<std::uint8_t>(evict[k] + 1);
      barrier(t, barrier_allreduce, *one_region, one);
      auto start = Clock::now();
      body();
      total += std::chrono::duration<double>(Clock::now() - start).count();
    }
    return total / rounds;
  };
  auto add = [&](const char* pattern, std::int64_t bytes, double seconds, double moved) {
    rows.push_back({{"backend", backend}, {"pattern", pattern}, {"processes", n},
                    {"bytes", bytes}, {"seconds", seconds}, {"gbps", moved * 8 / seconds / 1e9}});
  };
  // Bytes a rank of the dense ring sends: 2(N-1)/N of the data.
  auto ring_sent = [&](std::size_t bytes) {
    return static_cast<std::uint64_t>(2.0 * (n - 1) / n * static_cast<double>(bytes));
  };
  const auto wanted = [&](std::string_view pattern) {
    return o.patterns.empty() ||
           std::find(o.patterns.begin(), o.patterns.end(), pattern) != o.patterns.end();
  };
  // One-sided: rank 1's key for its buffer, to rank 0 (backends with put() only).
  const bool put_row = wanted("put") && t.supports_put();
  std::vector<std::byte> key(4096);
  if (put_row) {
    if (r == 1) {
      key = region->remote_key();
      auto own = t.register_region(key);
      Request q = t.send(0, 14, *own, {0, key.size()});
      wait(t, q);
    } else if (r == 0) {
      // Registered here, not before rank 1 replaces the vector: a Region must not outlive its bytes.
      auto key_region = t.register_region(key);
      Request q = t.recv(1, 14, *key_region, {0, key.size()});
      wait(t, q);
      key.resize(q.state()->bytes);
    }
  }
  for (std::int64_t size : o.sizes) {
    const std::size_t bytes = static_cast<std::size_t>(size);
    const int rounds = rounds_for(size);
    if (put_row) {
      // As p2p, one-sided: rank 0 writes `rounds` messages into rank 1's buffer (each complete
      // once it is in rank 1's memory), then tells it so; rank 1 only drives progress.
      double put = time_rounds(1, [&] {
        std::vector<Request> q;
        if (r == 0) {
          for (int i = 0; i < rounds; ++i) q.push_back(t.put(1, *region, {0, bytes}, key, 0));
        }
        if (r == 1 && o.put_busy_ms > 0) {  // computing, as a peer in its training step: no progress
          const auto end = Clock::now() + std::chrono::milliseconds(o.put_busy_ms);
          while (Clock::now() < end) {
          }
        }
        for (auto& x : q) wait(t, x);
        if (r < 2) {
          Request done = r == 0 ? t.send(1, 15, *one_region, {0, 0}) : t.recv(0, 15, *one_region, {0, 0});
          wait(t, done);
        }
      });
      add("put", size, put / rounds, static_cast<double>(bytes));
    }
    if (wanted("p2p")) {
      // Point to point: rank 0 streams `rounds` messages to rank 1, which acks the last one.
      double p2p = time_rounds(1, [&] {
        std::vector<Request> q;
        for (int i = 0; i < rounds; ++i) {
          if (r == 0) q.push_back(t.send(1, 10, *region, {0, bytes}));
          if (r == 1) q.push_back(t.recv(0, 10, *region, {0, bytes}));
        }
        for (auto& x : q) wait(t, x);
        if (r < 2) {
          Request ack = r == 0 ? t.recv(1, 11, *one_region, {0, 0}) : t.send(0, 11, *one_region, {0, 0});
          wait(t, ack);
        }
      });
      add("p2p", size, p2p / rounds, static_cast<double>(bytes));
    }
    // Ring-neighbor exchange.
    std::vector<int> peers{left, right};
    if (n == 2) peers.pop_back();
    std::vector<ByteRange> in{{bytes, bytes}, {2 * bytes, bytes}};
    in.resize(peers.size());
    if (wanted("ring_exchange")) {
      double exchange = time_rounds(rounds, [&] {
        transport::neighbor_exchange(t, 12, *region, {0, bytes}, peers, *region, in, peers);
      });
      add("ring_exchange", size, exchange, static_cast<double>(bytes * peers.size()));
    }
    // Ring allreduce (sum) of the buffer's first `bytes`.
    std::span<float> data(buffer.data(), bytes / sizeof(float));
    const transport::Tag reduce_tag = transport::TagLayout(t).make(transport::purpose::kBenchmark, 13);
    if (wanted("allreduce")) {
      double reduce = time_rounds(rounds, [&] {
        allreduce.run(*region, data, transport::ReduceOp::kSum, reduce_tag);
      });
      add("allreduce", size, reduce, static_cast<double>(bytes));
      rows.back()["sent_bytes"] = ring_sent(bytes);
    }
    if (wanted("allreduce_direct")) {
      double seconds = time_rounds(rounds, [&] {
        direct.run(*region, data, transport::ReduceOp::kSum, reduce_tag);
      });
      add("allreduce_direct", size, seconds, static_cast<double>(bytes));
      rows.back()["sent_bytes"] = ring_sent(bytes);
    }
    if (!wanted("allreduce_hd")) continue;  // the rows below are the full table's only
    // The same by recursive halving and doubling, which Allreduce takes above kRingMaxRanks.
    double halving = time_rounds(rounds, [&] {
      halving_doubling.run(*region, data, transport::ReduceOp::kSum, reduce_tag);
    });
    add("allreduce_hd", size, halving, static_cast<double>(bytes));
    // The ring with a 16-bit wire, to nearest (algorithm.wire), over random data.
    Rng fill(static_cast<std::uint64_t>(2000 + r));
    for (HalfFormat format : {HalfFormat::kFp16, HalfFormat::kBf16}) {
      for (float& x : data) x = static_cast<float>(fill.normal());
      transport::HalfRingAllreduce half(t, copts, format, /*stochastic=*/false);
      const std::uint64_t before = t.bytes_sent();
      half.run(data, transport::ReduceOp::kAverage, reduce_tag);
      const std::uint64_t sent = t.bytes_sent() - before;
      const double seconds = time_rounds(rounds, [&] {
        half.run(data, transport::ReduceOp::kAverage, reduce_tag);
      });
      add(format == HalfFormat::kFp16 ? "allreduce_fp16" : "allreduce_bf16", size, seconds,
          static_cast<double>(bytes));
      rows.back()["sent_bytes"] = sent;
    }
    // The sparse allreduce at each density: algorithm bandwidth over the dense size, as the
    // dense rows count it, so the two compare as times.
    transport::SparseAllreduce sparse(t, data.size(), copts);
    std::mt19937 pick(static_cast<std::uint32_t>(1000 + r));
    for (double density : o.densities) {
      const std::size_t k = std::max<std::size_t>(
          1, static_cast<std::size_t>(density * static_cast<double>(data.size())));
      const std::size_t block = std::max<std::size_t>(1, data.size() / k);
      std::vector<std::uint32_t> index;
      std::vector<float> value;
      for (std::size_t j = 0; j < k && j * block < data.size(); ++j) {
        const std::size_t span = std::min(block, data.size() - j * block);
        index.push_back(static_cast<std::uint32_t>(j * block + pick() % span));
        value.push_back(static_cast<float>(pick() % 1000) / 1000.0f);
      }
      transport::SparseAllreduceStats stats;
      const double seconds = time_rounds(rounds, [&] {
        stats = sparse.run(index, value, data, transport::ReduceOp::kSum, reduce_tag);
      });
      add("sparse", size, seconds, static_cast<double>(bytes));
      rows.back()["density"] = density;
      rows.back()["sent_bytes"] = stats.bytes_sent;
      rows.back()["went_dense"] = stats.went_dense;
      rows.back()["result_nonzeros"] = stats.result_nonzeros;
    }
  }
  if (r != 0) rows.clear();
  return rows;
}

// Forks `n` ranks of a process backend; returns rank 0's rows.
std::vector<nlohmann::json> run_processes(const std::string& backend, int n, const CommOptions& o) {
  char dir_template[] = "/tmp/murmur-bench-comm-XXXXXX";
  std::string dir = ::mkdtemp(dir_template);
  int fds[2];
  if (::pipe(fds) != 0) throw IoError("murmur-bench comm: pipe failed");
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      int code = 0;
      try {
        TransportConfig c;
        c.backend = backend;
        c.host = "127.0.0.1";  // every rank is a process of this host
        c.rendezvous_dir = dir;
        c.chunk_bytes = o.chunk_bytes;
        c.poll_spin_us = o.poll_spin_us;
        auto t = transport::make_transport(c, r, n);
        std::string out;
        for (auto& row : bench_rank(*t, backend, o)) out += row.dump() + "\n";
        if (!out.empty() && ::write(fds[1], out.data(), out.size()) < 0) code = 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "murmur-bench comm: %s rank %d: %s\n", backend.c_str(), r, e.what());
        code = 1;
      }
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t got; (got = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, got);
  ::close(fds[0]);
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::filesystem::remove_all(dir);
  if (!ok) throw TransportError(fmt::format("murmur-bench comm: a {} rank failed (see above)", backend));
  std::vector<nlohmann::json> rows;
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

std::vector<nlohmann::json> run_threads(int n, const CommOptions& o) {
  auto world = transport::inproc::make_world(n);
  std::vector<std::vector<nlohmann::json>> rows(n);
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        rows[r] = bench_rank(*world[r], "inproc", o);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return rows[0];
}

}  // namespace

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void add_transfer_options(CLI::App& sub, CommOptions& o, const std::string& backends_help) {
  sub.add_option("--backends", o.backends, backends_help);
  sub.add_option("--processes", o.processes, "rank counts")->delimiter(',');
  sub.add_option("--sizes", o.sizes, "message sizes in bytes")->delimiter(',');
  sub.add_option("--chunk-bytes", o.chunk_bytes, "pipelining unit (transport.chunk_bytes)");
  sub.add_option("--poll-spin-us", o.poll_spin_us,
                 "tcp: polling after the last event before the I/O thread sleeps (transport.poll_spin_us)");
}

std::vector<nlohmann::json> comm_rows(const std::string& backend, int n, const CommOptions& o) {
  return backend == "inproc" ? run_threads(n, o) : run_processes(backend, n, o);
}

namespace {

int run_comm(const CommOptions& o) {
  std::vector<std::string> backends = o.backends.empty() ? transport::process_backends() : split_list(o.backends);
  if (o.backends.empty()) backends.push_back("inproc");
  if (!o.json) {
    std::printf("%-8s %-14s %5s %10s %12s %10s %12s\n", "backend", "pattern", "procs", "bytes",
                "seconds", "Gbit/s", "sent/rank");
  }
  for (const auto& backend : backends) {
    for (int n : o.processes) {
      auto rows = comm_rows(backend, n, o);
      for (auto& row : rows) {
        if (o.json) {
          std::printf("%s\n", row.dump().c_str());
        } else {
          std::string pattern = row["pattern"].get<std::string>();
          if (row.contains("density")) {
            pattern += fmt::format(" {:g}%{}", 100 * row["density"].get<double>(),
                                   row["went_dense"].get<bool>() ? " d" : "");
          }
          const std::string sent =
              row.contains("sent_bytes")
                  ? std::to_string(row["sent_bytes"].get<std::uint64_t>()) : "";
          std::printf("%-8s %-14s %5d %10lld %12.6f %10.2f %12s\n",
                      row["backend"].get<std::string>().c_str(), pattern.c_str(),
                      row["processes"].get<int>(),
                      static_cast<long long>(row["bytes"].get<std::int64_t>()),
                      row["seconds"].get<double>(), row["gbps"].get<double>(), sent.c_str());
        }
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

const RegisterBench kRegister{{
    "comm",
    "point-to-point (two- and one-sided), ring-neighbor exchange, ring and halving-doubling "
    "allreduce, and sparse allreduce figures of each transport",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<CommOptions>();
      add_transfer_options(sub, *o, "comma-separated (tcp,ucx,ofi,inproc); default: all built");
      sub.add_option("--densities", o->densities,
                     "the sparse allreduce's fractions of nonzeros per rank")->delimiter(',');
      sub.add_flag("--cold", o->cold,
                   "start each timed round with cold caches, as a training step leaves them");
      sub.add_option("--put-busy-ms", o->put_busy_ms,
                     "put: rank 1 computes this long before it drives progress, as a peer in "
                     "its training step (whether a put needs the target's CPU)");
      sub.add_option("--patterns", o->patterns,
                     "comma-separated, of p2p, put, ring_exchange, allreduce, allreduce_direct, "
                     "allreduce_hd; "
                     "default: all")->delimiter(',');
      sub.add_flag("--json", o->json, "one JSON object per line");
      return [o] { return run_comm(*o); };
    },
}};

}  // namespace
}  // namespace murmur::tools
