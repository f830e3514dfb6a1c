#include "tests/api/peers.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "tests/time_scale.h"

namespace murmur::testing {
namespace {

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

std::string config_of(int n, int rank, const std::string& yaml, const PeersOptions& o,
                      const std::filesystem::path& rendezvous) {
  std::string backend = o.backend, provider;
  if (backend.rfind("ofi:", 0) == 0) {
    provider = backend.substr(4);
    backend = "ofi";
  }
  std::string text = yaml + fmt::format(
      "\nworld: {{size: {}, rank: {}}}\ntransport: {{backend: {}, host: 127.0.0.1, rendezvous_dir: {}, "
      "connect_timeout_ms: {}, recv_timeout_ms: {}{}}}\n",
      n, rank, backend, rendezvous.string(), 20000 * kTimeScale, 20000 * kTimeScale,
      provider.empty() ? "" : ", ofi_provider: " + provider);
  return text;
}

}  // namespace

std::vector<std::string> run_peers(int n, const std::string& yaml, const std::filesystem::path& out,
                                   const std::function<void(Communicator&)>& body,
                                   const PeersOptions& options) {
  const auto rendezvous = out / "rendezvous";
  std::filesystem::create_directories(rendezvous);
  std::vector<pid_t> pids(n, -1);
  std::vector<int> pipes(n, -1);
  std::fflush(nullptr);  // or the children inherit unflushed output and print it again
  for (int r = 0; r < n; ++r) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      std::string message;
      // UCX's handlers for crash signals can hang a corrupted process instead of ending it
      // (as murmur-peer says): a crash here must fail the test, not time it out.
      for (const int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(sig, SIG_DFL);
      try {
        ::setenv("FI_TCP_IFACE", "lo", 0);  // libfabric's tcp provider: loopback only
        ::setenv("MURMUR_SECRET", "api-test-secret", 1);
        for (const auto& kv : options.environment) ::putenv(::strdup(kv.c_str()));
        Options o;
        o.config_yaml = config_of(n, r, yaml, options, rendezvous);
        o.out = out.string();
        o.handle_signals = false;
        Communicator comm(o);
        body(comm);
      } catch (const std::exception& e) {
        message = e.what();
        if (message.empty()) message = "(an exception without a message)";
      }
      if (!message.empty()) (void)!::write(fds[1], message.data(), message.size());
      ::_exit(message.empty() ? 0 : 1);  // never back into the test framework
    }
    ::close(fds[1]);
    pids[r] = pid;
    pipes[r] = fds[0];
  }
  std::vector<std::string> errors(n);
  const auto deadline = std::chrono::steady_clock::now() + scaled(options.timeout);
  int running = n;
  while (running > 0) {
    for (int r = 0; r < n; ++r) {
      if (pids[r] < 0) continue;
      int status = 0;
      if (::waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      pids[r] = -1;
      --running;
      errors[r] = read_all(pipes[r]);
      ::close(pipes[r]);
      if (errors[r].empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        errors[r] = fmt::format("exited with status {:#x}", status);
      }
    }
    if (running > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (pids[r] < 0) continue;
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        ::close(pipes[r]);
        errors[r] = "timed out";
        pids[r] = -1;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return errors;
}

std::string failed(const std::vector<std::string>& errors) {
  std::string out;
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r].empty()) out += fmt::format("rank {}: {}\n", r, errors[r]);
  }
  return out;
}

}  // namespace murmur::testing
