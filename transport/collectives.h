// Collectives built on the Transport interface only, so every backend has them: neighbor
// exchange (send one buffer to a set of ranks, receive one from each of another set) and ring
// allreduce over floats (reduce-scatter then allgather, chunked and pipelined, after Patarasuk
// and Yuan 2009: each rank sends 2(N-1)/N of the data, which is bandwidth-optimal). Called by the
// thread that drives the transport. Every wait has a deadline of CollectiveOptions::timeout from
// its start; a rank that does not answer in time is reported as PeerLost.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <span>
#include <vector>

#include "transport/float_ops.h"
#include "transport/transport.h"

namespace murmur::transport {

struct CollectiveOptions {
  std::chrono::milliseconds timeout{60000};  // per wait (transport.recv_timeout_ms)
  std::size_t chunk_bytes = 1 << 20;         // pipelining unit (transport.chunk_bytes)
};

// Sends range `out` of `from` to every rank in `send_to` and receives, from each rank
// recv_from[i], a message into range `in[i]` of `into`, all under `tag`. Returns the bytes
// received from each. Throws PeerLost naming the rank that did not answer in time.
std::vector<std::size_t> neighbor_exchange(Transport& transport, Tag tag, const Region& from,
                                           ByteRange out, std::span<const int> send_to,
                                           Region& into, std::span<const ByteRange> in,
                                           std::span<const int> recv_from,
                                           const CollectiveOptions& options = {});

enum class ReduceOp { kSum, kAverage };

// Ring allreduce of float arrays with a scratch region kept between calls (register once, like
// the arena). `tag` is a base tag of transport/tag.h (step and chunk 0); the ring numbers its
// steps and chunks in those fields, taking chunks larger than chunk_bytes where the layout
// could not number them all.
class RingAllreduce {
 public:
  // `ops` (host memory and loops by default) holds the scratch and does the sums: the data
  // must be memory of its kind. `ops` must outlive the ring.
  RingAllreduce(Transport& transport, CollectiveOptions options = {},
                FloatOps& ops = host_float_ops());

  // Replaces `data` (a float range inside `region`) on every rank by the sum (or mean) over
  // ranks; every rank ends with the bitwise same result. All ranks call it with the same size
  // and tag.
  void run(Region& region, std::span<float> data, ReduceOp op, Tag tag);
  // The ring runs over these ranks only (ascending, this rank among them), e.g. the live ones
  // after a failure; empty (the default) means every rank of the world.
  void set_ranks(std::vector<int> ranks) { ranks_ = std::move(ranks); }

 private:
  Transport& transport_;
  CollectiveOptions options_;
  FloatOps& ops_;
  std::vector<int> ranks_;
  FloatOps::Scratch scratch_;  // two segments: double-buffers the reduce-scatter receives
};

// One-shot form (registers a scratch region per call).
void ring_allreduce(Transport& transport, Region& region, std::span<float> data, ReduceOp op,
                    Tag tag, const CollectiveOptions& options = {});

// Cancels, when a collective unwinds with an exception, every request of the watched lists that
// is still in flight: a later message must not land in a buffer that the caller frees while the
// exception propagates (that was a use-after-free when a neighbor died mid-allreduce).
class CancelOnUnwind {
 public:
  explicit CancelOnUnwind(Transport& transport)
      : transport_(transport), uncaught_(std::uncaught_exceptions()) {}
  ~CancelOnUnwind();
  CancelOnUnwind(const CancelOnUnwind&) = delete;
  CancelOnUnwind& operator=(const CancelOnUnwind&) = delete;
  void watch(std::vector<Request>& requests) { lists_.push_back(&requests); }

 private:
  Transport& transport_;
  int uncaught_;
  std::vector<std::vector<Request>*> lists_;
};

// Waits for `request` until options.timeout; throws PeerLost naming the peer and `what`
// if it is not done by then.
void wait_or_lost(Transport& transport, Request& request, std::chrono::milliseconds timeout,
                  const char* what);

}  // namespace murmur::transport
