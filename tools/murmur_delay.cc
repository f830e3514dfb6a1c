// murmur-delay: one-way latency and jitter for an emulated link where the kernel has no netem
// qdisc (sch_netem). It runs inside a peer's network namespace and holds every packet that an
// iptables NFQUEUE rule hands it (tools/murmur_netem adds the rule on the peer's eth0, after
// this process has bound the queue) for `delay` plus a uniform draw in [-jitter, +jitter], then
// lets it go, as netem does without a distribution table (jitter reorders packets, as netem's
// does). Only metadata crosses to user space (NFQNL_COPY_META), and GSO super-packets are queued
// whole (NFQA_CFG_F_GSO), so one verdict moves up to 64 KiB.
//   ip netns exec NS murmur-delay --queue 0 --delay-us 5000 --jitter-us 1000
// Prints "ready" on stdout once the queue is bound; runs until SIGTERM/SIGINT. A packet beyond
// --limit held packets is dropped, like netem's limit. At exit it says how late it let packets
// go (it shares the cores with the peers, and a held packet waits for it to be scheduled), and
// --report FILE writes the same as JSON.
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include <libnetfilter_queue/libnetfilter_queue.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

volatile sig_atomic_t stop = 0;
void on_signal(int) { stop = 1; }

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

struct Held {
  std::int64_t release_ns;
  std::uint32_t id;
  bool operator>(const Held& o) const { return release_ns > o.release_ns; }
};

struct Delayer {
  std::int64_t delay_ns = 0;
  std::int64_t jitter_ns = 0;
  std::size_t limit = 10000;
  std::mt19937_64 rng;
  std::priority_queue<Held, std::vector<Held>, std::greater<>> held;
  nfq_q_handle* queue = nullptr;
  std::uint64_t passed = 0, dropped = 0;
  // How late packets left against their release time: this process shares the cores with the
  // peers, and a packet held past its time is latency the link did not ask for.
  std::int64_t late_ns_sum = 0, late_ns_max = 0;
  std::uint64_t late_over_1ms = 0;

  std::int64_t hold_for() {
    if (jitter_ns == 0) return delay_ns;
    std::uniform_int_distribution<std::int64_t> d(-jitter_ns, jitter_ns);
    return std::max<std::int64_t>(0, delay_ns + d(rng));
  }
  void release_due(std::int64_t now, bool timed = true) {
    while (!held.empty() && held.top().release_ns <= now) {
      nfq_set_verdict(queue, held.top().id, NF_ACCEPT, 0, nullptr);
      if (timed) {
        const std::int64_t late = now - held.top().release_ns;
        late_ns_sum += late;
        late_ns_max = std::max(late_ns_max, late);
        late_over_1ms += late > 1'000'000 ? 1 : 0;
      }
      held.pop();
      ++passed;
    }
  }
};

int on_packet(nfq_q_handle* queue, nfgenmsg*, nfq_data* data, void* arg) {
  auto& d = *static_cast<Delayer*>(arg);
  const nfqnl_msg_packet_hdr* header = nfq_get_msg_packet_hdr(data);
  if (header == nullptr) return 0;
  const std::uint32_t id = ntohl(header->packet_id);
  if (d.held.size() >= d.limit) {
    ++d.dropped;
    return nfq_set_verdict(queue, id, NF_DROP, 0, nullptr);
  }
  d.held.push({now_ns() + d.hold_for(), id});
  return 0;
}

int fail(const char* what) {
  std::fprintf(stderr, "murmur-delay: %s: %s\n", what, std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"murmur-delay: hold NFQUEUE packets for a delay with jitter (netem without sch_netem)"};
  unsigned queue_num = 0;
  std::int64_t delay_us = 0, jitter_us = 0;
  std::uint64_t seed = 1;
  std::string report;
  Delayer d;
  app.add_option("--queue", queue_num, "NFQUEUE number the iptables rule names")->required();
  app.add_option("--delay-us", delay_us, "one-way delay, microseconds")->check(CLI::NonNegativeNumber);
  app.add_option("--jitter-us", jitter_us, "uniform jitter around the delay, microseconds")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--limit", d.limit, "packets held at most; beyond it a packet is dropped")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "seed of the jitter's draws");
  app.add_option("--report", report, "at exit, write the packets passed and dropped and how late "
                 "they went (JSON) to this file");
  CLI11_PARSE(app, argc, argv);
  d.delay_ns = delay_us * 1000;
  d.jitter_ns = jitter_us * 1000;
  d.rng.seed(seed);

  nfq_handle* handle = nfq_open();
  if (handle == nullptr) return fail("nfq_open (needs root and the kernel's nfnetlink_queue)");
  d.queue = nfq_create_queue(handle, queue_num, &on_packet, &d);
  if (d.queue == nullptr) return fail("nfq_create_queue (is another process bound to it?)");
  if (nfq_set_mode(d.queue, NFQNL_COPY_META, 0) < 0) return fail("nfq_set_mode");
  if (nfq_set_queue_maxlen(d.queue, static_cast<std::uint32_t>(d.limit) * 2) < 0) {
    return fail("nfq_set_queue_maxlen");
  }
  // Whole GSO packets (no segmentation on the way to user space); older kernels lack the flag.
  nfq_set_queue_flags(d.queue, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO);
  const int fd = nfq_fd(handle);
  // A burst of packets must not overflow the socket (ENOBUFS loses their verdicts' ids).
  nfnl_rcvbufsiz(nfq_nfnlh(handle), 32u << 20);

  ::signal(SIGTERM, on_signal);
  ::signal(SIGINT, on_signal);
  std::printf("ready\n");
  std::fflush(stdout);

  std::vector<char> buffer(1 << 16);
  while (!stop) {
    timespec wait{0, 100'000'000};  // at most 100 ms, to notice a signal
    if (!d.held.empty()) {
      const std::int64_t left = std::max<std::int64_t>(0, d.held.top().release_ns - now_ns());
      if (left < 100'000'000) wait = {0, static_cast<long>(left)};
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ppoll(&p, 1, &wait, nullptr);
    if (ready < 0 && errno != EINTR) return fail("ppoll");
    if (ready > 0) {
      // Drain what is there without blocking: every packet gets its release time on arrival.
      for (;;) {
        const ssize_t n = recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
        if (n < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
          if (errno == ENOBUFS) {  // the kernel dropped notifications: those packets are lost
            std::fprintf(stderr, "murmur-delay: queue %u overran its socket\n", queue_num);
            continue;
          }
          return fail("recv");
        }
        nfq_handle_packet(handle, buffer.data(), static_cast<int>(n));
      }
    }
    d.release_due(now_ns());
  }
  const std::uint64_t timed = d.passed;
  const double late_us_mean =
      timed > 0 ? static_cast<double>(d.late_ns_sum) / static_cast<double>(timed) / 1e3 : 0.0;
  const double late_ms_max = static_cast<double>(d.late_ns_max) / 1e6;
  d.release_due(INT64_MAX, false);  // let everything still held go before the queue closes
  std::fprintf(stderr,
               "murmur-delay: queue %u: %llu packets passed, %llu dropped at the limit; released "
               "%.1f us late on average, %.1f ms at worst, %llu more than 1 ms late\n",
               queue_num, static_cast<unsigned long long>(d.passed),
               static_cast<unsigned long long>(d.dropped), late_us_mean, late_ms_max,
               static_cast<unsigned long long>(d.late_over_1ms));
  if (!report.empty()) {
    std::ofstream out(report);
    out << "{\"packets_passed\": " << d.passed << ", \"packets_dropped\": " << d.dropped
        << ", \"late_us_mean\": " << late_us_mean << ", \"late_ms_max\": " << late_ms_max
        << ", \"packets_over_1ms_late\": " << d.late_over_1ms << "}\n";
    if (!out) std::fprintf(stderr, "murmur-delay: cannot write %s\n", report.c_str());
  }
  nfq_destroy_queue(d.queue);
  nfq_close(handle);
  return 0;
}
