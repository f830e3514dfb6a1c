// The harness of the transport contract suite: which backends this build runs it on, and a runner
// that executes one lambda on N ranks, as threads of this process (inproc) or as forked processes
// on 127.0.0.1 with a fresh rendezvous directory (every other backend). A rank reports failure by
// throwing; MURMUR_CHECK throws with file and line. Every run is bounded by RunOptions::timeout.
#pragma once

#include <chrono>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config.h"
#include "transport/transport.h"

namespace murmur::transport::testing {

// "inproc", "tcp", then whatever else this build has: "ucx", "ofi:tcp", "ofi:shm" (the ofi
// backend with one libfabric provider).
std::vector<std::string> built_backends();

class RankContext {
 public:
  RankContext(Transport& transport, std::string backend, std::function<void()> on_die = {})
      : transport_(transport), backend_(std::move(backend)), on_die_(std::move(on_die)) {}
  Transport& transport() { return transport_; }
  int rank() const { return transport_.rank(); }
  int size() const { return transport_.world_size(); }
  const std::string& backend() const { return backend_; }
  // Ends this rank the way a crash would: a process _exits without closing anything; an inproc
  // rank's transport is destroyed under its peers. Does not return.
  [[noreturn]] void die();

 private:
  Transport& transport_;
  std::string backend_;
  // inproc: leaves the world before the stack unwinds; a process: marks itself arrived
  std::function<void()> on_die_;
};

struct RunOptions {
  std::chrono::milliseconds timeout{60000};  // the whole run (x kTimeScale); stragglers are killed
  // Adjusts a rank's config (secrets, timeouts) before its transport is made.
  std::function<void(TransportConfig&, int rank)> configure;
};

struct RankResult {
  bool ok = false;    // the body returned
  bool died = false;  // the body called die()
  std::string message;  // what it threw, or "timed out"
};

std::vector<RankResult> run_ranks(const std::string& backend, int size,
                                  const std::function<void(RankContext&)>& body,
                                  const RunOptions& options = {});

// "" if every rank returned normally, else one line per rank that did not.
std::string failures(const std::vector<RankResult>& results);

// 0, 1, ..., size - 1: the ranks of a whole world.
std::vector<int> every_rank(int size);

// Throws unless the left and right neighbors of this rank (among `ranks`, ascending) hold the
// bitwise same `x`: around the ring, every rank then does. Exchanges under `tag`.
void check_same_as_neighbors(Transport& t, std::span<float> x, std::span<const int> ranks,
                             Tag tag);

// Plays a rank that forges one message of a collective: sends `message` to `peer` under `tag`
// while it receives (and drops) up to `reply_bytes` that `peer` sends this rank under the same
// tag, so that `peer` is left to judge the forgery alone. Throws PeerLost after `timeout`.
void send_forged(Transport& t, int peer, Tag tag, std::span<std::byte> message,
                 std::size_t reply_bytes, std::chrono::milliseconds timeout);

// The config the harness gives each process rank (loopback, port 0, short timeouts).
TransportConfig loopback_config(const std::string& backend, const std::string& rendezvous_dir);

[[noreturn]] void check_failed(const char* expr, const char* file, int line);

}  // namespace murmur::transport::testing

#define MURMUR_CHECK(cond) \
  ((cond) ? (void)0 : ::murmur::transport::testing::check_failed(#cond, __FILE__, __LINE__))
