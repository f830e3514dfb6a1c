// What the averaging algorithms share for talking to neighbors: message tags derived from
// (purpose, round) so that rounds and algorithms never mix, registered receive slots allocated
// once, a neighbor exchange into those slots, and CommThread, the one background thread that
// runs an algorithm's exchange while the next local step computes. A CommThread is used by one
// owner thread; while a job runs, the job is the only user of the Transport.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "core/config.h"
#include "topology/mixing.h"
#include "transport/collectives.h"
#include "transport/transport.h"

namespace murmur::optimizers {

// Point-to-point purposes: tag = purpose << 48 | round (48 bits), so bits 56..63 stay 0.
enum class Purpose : std::uint64_t {
  kGossip = 1, kPushSum = 2, kPairwise = 3, kChoco = 4,
  kAgreement = 5,  // live_allreduce.h: round = the agreement's number
  kJoin = 6,       // rejoin.h: a restarted peer asks to come back (round 0) / the answer (1, 2)
  kGossipChunk = 7,  // runtime/device_gossip.h: one chunk of a pipelined D-PSGD round (chunk_tag)
};
// Ring-allreduce purposes: the tag passed to RingAllreduce is purpose << 24 | round (24 bits),
// which RingAllreduce shifts left by 32: bits 56..63 hold the purpose (1..15), never 0 (the
// point-to-point tags above) and never 0xFF (the runtime's own final average).
enum class ReducePurpose : std::uint64_t { kAllreduce = 1, kLocalSgd = 2, kDiloco = 3 };

transport::Tag p2p_tag(Purpose purpose, std::int64_t round);
transport::Tag allreduce_tag(ReducePurpose purpose, std::int64_t round);
// A chunked exchange's tags: purpose << 48 | (round mod 2^28) << 20 | chunk, in the 48 bits of
// round that p2p_tag gives, so a purpose keeps bits 48..55 as above. Throws Error if chunk is
// kMaxChunks or more. A round repeats after 2^28 rounds, when nothing of it is in flight.
inline constexpr std::size_t kMaxChunks = std::size_t{1} << 20;
transport::Tag chunk_tag(Purpose purpose, std::int64_t round, std::size_t chunk);

// transport.recv_timeout_ms and chunk_bytes as collective options.
transport::CollectiveOptions collective_options(const TransportConfig& config);

// Seconds since construction or the last restart().
class Stopwatch {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void restart() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// `count` receive buffers of `floats` floats each, in one registered allocation (each slot
// starts 256-byte aligned). Grows, re-registering, only when a round needs more slots than any
// before (time-varying in-degrees), so steady-state rounds allocate nothing.
class RecvSlots {
 public:
  RecvSlots(transport::Transport& transport, std::size_t floats);
  // Makes at least `count` slots; must not be called while a receive into them is pending.
  void reserve(std::size_t count);
  std::size_t floats() const { return floats_; }
  transport::Region& region() { return *region_; }
  transport::ByteRange range(std::size_t k) const {
    return {k * stride_ * sizeof(float), floats_ * sizeof(float)};
  }
  std::span<float> slot(std::size_t k) { return {storage_.data() + k * stride_, floats_}; }

 private:
  transport::Transport& transport_;
  std::size_t floats_, stride_;
  std::size_t count_ = 0;
  std::vector<float> storage_;
  std::unique_ptr<transport::Region> region_;
};

// Sends range `out` of `from` to every rank of send_to and receives one message from each rank
// of recv_from into slots 0, 1, ... under `tag`; returns the bytes each sent. Throws PeerLost as
// neighbor_exchange does, and ProtocolError if `exact_size` and a message is not exactly
// slots.floats() floats long.
std::vector<std::size_t> exchange_into_slots(transport::Transport& transport, transport::Tag tag,
                                             const transport::Region& from,
                                             transport::ByteRange out, std::span<const int> send_to,
                                             RecvSlots& slots, std::span<const int> recv_from,
                                             const transport::CollectiveOptions& options,
                                             bool exact_size = true);

// One background thread that runs one job at a time. start() hands it a job; wait() blocks
// until the job is done and rethrows what it threw. The destructor waits for the job in
// flight (discarding its error) and joins.
class CommThread {
 public:
  CommThread();
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Starts `job`; waits first for the one in flight, if any.
  void start(std::function<void()> job);
  // Returns the seconds spent blocked (0 if idle). Throws what the job threw.
  double wait();
  bool busy() const;

 private:
  void loop();

  mutable std::mutex mutex_;  // guards job_, busy_, stop_, error_
  std::condition_variable cv_;
  std::function<void()> job_;
  bool busy_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts after the state above exists
};

// The mixing of `round`, cached for static topologies (computed once at construction).
class MixingSchedule {
 public:
  MixingSchedule(const TopologyConfig& config, int n, int rank, std::uint64_t seed);
  const topology::RankMixing& at(std::int64_t round);
  bool time_varying() const { return time_varying_; }

 private:
  const TopologyConfig& config_;
  int n_, rank_;
  std::uint64_t seed_;
  bool time_varying_;
  std::int64_t round_ = -1;
  topology::RankMixing current_;
};

}  // namespace murmur::optimizers
