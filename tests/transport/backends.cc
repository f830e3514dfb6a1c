#include "tests/transport/backends.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "tests/time_scale.h"
#include "transport/collectives.h"
#include "transport/factory.h"
#include "transport/inproc/transport.h"

namespace murmur::transport::testing {

namespace {
constexpr int kDiedCode = 77;
struct Died {};  // thrown by die() on an inproc rank, caught by its thread
}  // namespace

std::vector<std::string> built_backends() {
  std::vector<std::string> out{"inproc", "tcp"};
  // The ucx/ofi suites add theirs here, e.g. #ifdef MURMUR_WITH_UCX out.push_back("ucx");
#ifdef MURMUR_WITH_UCX
  out.push_back("ucx");
#endif
#ifdef MURMUR_WITH_OFI
  // One entry per libfabric provider; loopback_config() splits "ofi:<provider>".
  out.push_back("ofi:tcp");
  out.push_back("ofi:shm");
#endif
  return out;
}

void check_failed(const char* expr, const char* file, int line) {
  throw std::runtime_error(fmt::format("{}:{}: check failed: {}", file, line, expr));
}

void RankContext::die() {
  // inproc: leave the world first, peers must not copy from buffers that unwinding is about to
  // free. A process: tell the harness not to wait for it at the end (it touches no transport).
  if (on_die_) on_die_();
  if (backend_ != "inproc") ::_exit(kDiedCode);
  throw Died{};
}

TransportConfig loopback_config(const std::string& backend, const std::string& rendezvous_dir) {
  TransportConfig c;
  c.backend = backend;
  if (backend.rfind("ofi:", 0) == 0) {
    c.backend = "ofi";
    c.ofi_provider = backend.substr(4);
  }
  c.host = "127.0.0.1";
  c.port = 0;
  c.rendezvous_dir = rendezvous_dir;
  c.connect_timeout_ms = murmur::testing::scaled_ms(20000);
  c.recv_timeout_ms = murmur::testing::scaled_ms(20000);
  c.secret_env = "MURMUR_TEST_SECRET_UNSET";
  return c;
}

std::vector<int> every_rank(int size) {
  std::vector<int> all(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) all[static_cast<std::size_t>(r)] = r;
  return all;
}

void send_forged(Transport& t, int peer, Tag tag, std::span<std::byte> message,
                 std::size_t reply_bytes, std::chrono::milliseconds timeout) {
  std::vector<std::byte> reply(reply_bytes);
  auto out = t.register_region(message);
  auto in = t.register_region(reply);
  Request r = t.recv(peer, tag, *in, {0, reply.size()});
  Request s = t.send(peer, tag, *out, {0, message.size()});
  wait_or_lost(t, s, timeout, "the forged send");
  wait_or_lost(t, r, timeout, "the peer's own message");
}

void check_same_as_neighbors(Transport& t, std::span<float> x, std::span<const int> ranks,
                             Tag tag) {
  const auto at = std::find(ranks.begin(), ranks.end(), t.rank()) - ranks.begin();
  const auto size = static_cast<std::ptrdiff_t>(ranks.size());
  if (size < 2 || x.empty()) return;
  std::vector<int> peers{ranks[(at + size - 1) % size], ranks[(at + 1) % size]};
  if (size == 2) peers.pop_back();
  std::vector<float> theirs(2 * x.size());
  auto out = t.register_region(std::as_writable_bytes(x));
  auto in = t.register_region(std::as_writable_bytes(std::span(theirs)));
  const std::size_t bytes = x.size_bytes();
  std::vector<ByteRange> ranges{{0, bytes}, {bytes, bytes}};
  ranges.resize(peers.size());
  neighbor_exchange(t, tag, *out, {0, bytes}, peers, *in, ranges, peers);
  for (std::size_t p = 0; p < peers.size(); ++p) {
    if (std::memcmp(theirs.data() + p * x.size(), x.data(), bytes) != 0) {
      throw std::runtime_error(fmt::format("rank {} and rank {} differ", t.rank(), peers[p]));
    }
  }
}

std::string failures(const std::vector<RankResult>& results) {
  std::string out;
  for (std::size_t r = 0; r < results.size(); ++r) {
    if (!results[r].ok) out += fmt::format("rank {}: {}\n", r, results[r].message);
  }
  return out;
}

static std::vector<RankResult> run_threads(int size, const std::function<void(RankContext&)>& body) {
  auto transports = inproc::make_world(size);
  std::vector<RankResult> results(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        RankContext ctx(*transports[r], "inproc", [&, r] { transports[r].reset(); });
        body(ctx);
        results[r].ok = true;
      } catch (const Died&) {
        results[r].died = true;
        results[r].message = "died";
      } catch (const std::exception& e) {
        results[r].message = e.what();
      }
      transports[r].reset();  // a finished or dead rank leaves the world
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

// A barrier of forked ranks through files in the run's temp dir: arrive, then wait for all.
static void arrive(const std::string& dir, int rank) {
  std::ofstream(fmt::format("{}/done-{}", dir, rank)).put('1');
}

static void arrive_and_wait(const std::string& dir, int rank, int size,
                            std::chrono::milliseconds limit) {
  arrive(dir, rank);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int q = 0; q < size; ++q) {
    while (!std::filesystem::exists(fmt::format("{}/done-{}", dir, q)) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

static std::vector<RankResult> run_processes(const std::string& backend, int size,
                                             const std::function<void(RankContext&)>& body,
                                             const RunOptions& options) {
  char dir_template[] = "/tmp/murmur-transport-XXXXXX";
  std::string dir = ::mkdtemp(dir_template);
  std::vector<pid_t> pids(size, -1);
  std::vector<int> pipes(size, -1);
  std::fflush(nullptr);  // or the children inherit unflushed output and print it again
  for (int r = 0; r < size; ++r) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      int code = 1;
      std::string message;
      try {
        ::setenv("FI_TCP_IFACE", "lo", 0);  // libfabric's tcp provider: loopback only
        TransportConfig config = loopback_config(backend, dir);
        if (options.configure) options.configure(config, r);
        auto transport = make_transport(config, r, size);
        // A rank that dies arrives on its way out: the others need not wait for it below.
        RankContext ctx(*transport, backend, [&dir, r] { arrive(dir, r); });
        body(ctx);
        code = 0;
        // Like MPI_Finalize: nobody tears its transport down while others may still be
        // talking to it (a closed UCX endpoint turns the peers' last receives into
        // "Endpoint timeout"). A rank that never comes (one that hangs) is bounded.
        arrive_and_wait(dir, r, size, murmur::testing::scaled(std::chrono::milliseconds(5000)));
      } catch (const std::exception& e) {
        message = e.what();
      }
      if (!message.empty()) (void)!::write(fds[1], message.data(), message.size());
      ::_exit(code);  // never back into the test framework
    }
    ::close(fds[1]);
    pids[r] = pid;
    pipes[r] = fds[0];
  }
  std::vector<RankResult> results(size);
  auto deadline = std::chrono::steady_clock::now() + murmur::testing::scaled(options.timeout);
  int running = size;
  while (running > 0) {
    for (int r = 0; r < size; ++r) {
      if (pids[r] < 0) continue;
      int status = 0;
      if (::waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      pids[r] = -1;
      --running;
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      results[r].ok = code == 0;
      results[r].died = code == kDiedCode;
      char buf[4096];
      ssize_t n = ::read(pipes[r], buf, sizeof buf);
      results[r].message = n > 0 ? std::string(buf, n) : fmt::format("exit code {}", code);
    }
    if (running > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < size; ++r) {
        if (pids[r] < 0) continue;
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        pids[r] = -1;
        results[r].message = "timed out (killed)";
      }
      running = 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (int fd : pipes) ::close(fd);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return results;
}

std::vector<RankResult> run_ranks(const std::string& backend, int size,
                                  const std::function<void(RankContext&)>& body,
                                  const RunOptions& options) {
  if (backend == "inproc") return run_threads(size, body);
  return run_processes(backend, size, body, options);
}

}  // namespace murmur::transport::testing
