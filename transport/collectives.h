// Collectives built on the Transport interface only, so every backend has them: neighbor
// exchange (send one buffer to a set of ranks, receive one from each of another set) and two
// allreduces over floats, which Allreduce chooses between by the number of ranks:
// - the ring (reduce-scatter then allgather, chunked and pipelined, after Patarasuk and Yuan
//   2009): each rank sends 2(N-1)/N of the data, bandwidth-optimal, but in 2(N-1) steps, one
//   latency each: 2046 of them for 1024 ranks;
// - recursive halving then doubling (Rabenseifner 2004; Thakur, Rabenseifner and Gropp 2005):
//   the same 2(p-1)/p of the data for p a power of two, in 2 log2(p) steps; a world of N = p + q
//   ranks (q < p) first folds q ranks' data into q others and hands them the result at the end,
//   two more steps of the whole data for those 2q ranks.
// - direct (the reduce-scatter and the allgather each in one step, every rank sending to every
//   other at once): the same 2(N-1)/N of the data in 2 steps, but N-1 messages per rank per
//   step, each 1/N of the data; for the few ranks of one machine, where the ring's steps are
//   each a wait for a neighbor to be scheduled.
// Called by the thread that drives the transport. Every wait has a deadline of CollectiveOptions::timeout from
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

enum class AllreduceAlgorithm {
  kAuto,             // direct, ring or halving-doubling: Allreduce::algorithm_for
  kRing,
  kHalvingDoubling,
  kDirect,
};

// Up to this many ranks the ring's 2(N-1) latencies cost little next to its neighbor-only,
// pipelined traffic; above, its steps grow linearly and halving-doubling's logarithmically.
inline constexpr std::size_t kRingMaxRanks = 16;
// 3 and 4 ranks whose segments (the data / N) fit in one chunk take the direct allreduce: the
// ring cannot pipeline a segment of one chunk, so its 2(N-1) steps are each a full wait, where
// the direct one waits twice. Measured (docs/benchmarks.md) with 4 ranks; 2 ranks take the
// ring, which is the same two steps.
inline constexpr std::size_t kDirectMaxRanks = 4;

struct CollectiveOptions {
  std::chrono::milliseconds timeout{60000};  // per wait (transport.recv_timeout_ms)
  std::size_t chunk_bytes = 1 << 20;         // pipelining unit (transport.chunk_bytes)
  AllreduceAlgorithm allreduce = AllreduceAlgorithm::kAuto;
};

// Sends range `out` of `from` to every rank in `send_to` and receives, from each rank
// recv_from[i], a message into range `in[i]` of `into`, all under `tag`. Throws PeerLost naming
// the rank that did not answer in time, and ProtocolError naming one whose message did not
// fill its range exactly (wait_for_piece).
void neighbor_exchange(Transport& transport, Tag tag, const Region& from, ByteRange out,
                       std::span<const int> send_to, Region& into, std::span<const ByteRange> in,
                       std::span<const int> recv_from, const CollectiveOptions& options = {});

enum class ReduceOp { kSum, kAverage };

// Where a rank and its data stand in an allreduce over `ranks` (empty: the world), for the
// algorithms below: how many take part, this rank's index among them, who stands at each
// index, and where the data lies in its region. Throws TransportError, `what` first, if this
// rank is not among `ranks`, `tag` has its step or chunk set, or `data` is not inside `region`.
struct AllreducePlace {
  std::size_t ranks = 0, index = 0, data_offset = 0;
  std::span<const int> subset;  // the ranks taking part; empty: the world, index = rank

  int rank_at(std::size_t i) const { return subset.empty() ? static_cast<int>(i) : subset[i]; }
  // The data's floats [first, first + count), as bytes of its region.
  ByteRange floats(std::size_t first, std::size_t count) const {
    return {data_offset + first * sizeof(float), count * sizeof(float)};
  }
};
AllreducePlace allreduce_place(const Transport& transport, std::span<const int> ranks,
                               const Region& region, std::span<const float> data, Tag tag,
                               const char* what);

// The elements of one piece when `count` elements of `element_bytes` each go in pieces:
// chunk_bytes' worth, or more where the tag's chunk field could not number them all. Both
// sides of a transfer cut alike.
std::size_t piece_elements(const Transport& transport, std::size_t chunk_bytes,
                           std::size_t element_bytes, std::size_t count);

// What an allreduce algorithm keeps between calls: a scratch region (registered once, like the
// arena) and the ranks it runs over. `ops` (host memory and loops by default) holds the scratch
// and does the sums: the data must be memory of its kind. `ops` must outlive the allreduce.
class AllreduceAlgorithmBase {
 public:
  // The allreduce runs over these ranks only (ascending, this rank among them), e.g. the live
  // ones after a failure; empty (the default) means every rank of the world.
  void set_ranks(std::vector<int> ranks) { ranks_ = std::move(ranks); }

 protected:
  AllreduceAlgorithmBase(Transport& transport, CollectiveOptions options, FloatOps& ops)
      : transport_(transport), options_(options), ops_(ops) {}

  Transport& transport_;
  CollectiveOptions options_;
  FloatOps& ops_;
  std::vector<int> ranks_;
  FloatOps::Scratch scratch_;
};

// Ring allreduce of float arrays. `tag` is a base tag of transport/tag.h (step and chunk 0);
// the ring numbers its steps and chunks in those fields, taking chunks larger than chunk_bytes
// where the layout could not number them all. The scratch: two segments, double-buffering the
// reduce-scatter's receives.
class RingAllreduce : public AllreduceAlgorithmBase {
 public:
  RingAllreduce(Transport& transport, CollectiveOptions options = {},
                FloatOps& ops = host_float_ops())
      : AllreduceAlgorithmBase(transport, options, ops) {}

  // Replaces `data` (a float range inside `region`) on every rank by the sum (or mean) over
  // ranks; every rank ends with the bitwise same result. All ranks call it with the same size
  // and tag.
  void run(Region& region, std::span<float> data, ReduceOp op, Tag tag);
};

// Allreduce by recursive halving (reduce-scatter) then doubling (allgather), with the same
// contract as RingAllreduce: every rank ends with the bitwise same result (each element is
// summed on one rank only, then copied). `tag` is a base tag; steps number its step field
// (at most 2 log2(N) + 2 of them), pieces of chunk_bytes its chunk field. The scratch: the
// partner's half (or, folding in, its whole data).
class HalvingDoublingAllreduce : public AllreduceAlgorithmBase {
 public:
  HalvingDoublingAllreduce(Transport& transport, CollectiveOptions options = {},
                           FloatOps& ops = host_float_ops())
      : AllreduceAlgorithmBase(transport, options, ops) {}
  void run(Region& region, std::span<float> data, ReduceOp op, Tag tag);
};

// Allreduce by a direct reduce-scatter then a direct allgather, with the same contract as
// RingAllreduce: every rank ends with the bitwise same result (each element summed on the one
// rank that owns its segment, then copied). `tag` is a base tag; the two steps number its step
// field, pieces of chunk_bytes its chunk field. The scratch: N-1 segments, one per sender.
class DirectAllreduce : public AllreduceAlgorithmBase {
 public:
  DirectAllreduce(Transport& transport, CollectiveOptions options = {},
                  FloatOps& ops = host_float_ops())
      : AllreduceAlgorithmBase(transport, options, ops) {}
  void run(Region& region, std::span<float> data, ReduceOp op, Tag tag);
};

// The allreduce of every caller (the exact averages of membership/, the benchmarks): direct,
// the ring or halving-doubling, as options.allreduce says, or by the number of ranks taking
// part and the size of the data.
class Allreduce {
 public:
  Allreduce(Transport& transport, CollectiveOptions options = {},
            FloatOps& ops = host_float_ops());
  void run(Region& region, std::span<float> data, ReduceOp op, Tag tag);
  void set_ranks(std::vector<int> ranks);
  // Which one run() takes for `ranks` ranks taking part and `floats` of data.
  AllreduceAlgorithm algorithm_for(std::size_t ranks, std::size_t floats) const;

 private:
  CollectiveOptions options_;
  std::size_t world_;
  std::size_t ranks_;  // taking part: set_ranks()'s, or the world's
  RingAllreduce ring_;
  HalvingDoublingAllreduce halving_;
  DirectAllreduce direct_;
};

// The automatic choice (AllreduceAlgorithm::kAuto) for `ranks` ranks taking part, `bytes` of
// data and pieces of `chunk_bytes`; the cost model's plans make the same one.
AllreduceAlgorithm auto_allreduce(std::size_t ranks, double bytes, double chunk_bytes);

// One-shot form (registers a scratch region per call).
void ring_allreduce(Transport& transport, Region& region, std::span<float> data, ReduceOp op,
                    Tag tag, const CollectiveOptions& options = {});

// Cancels `request` if it is valid and still in flight, swallowing any error: for code that is
// already failing or being destroyed, whose own error (or none) is the one to report.
void cancel_quietly(Transport& transport, Request& request) noexcept;

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

// wait_or_lost, then throws ProtocolError naming the sender and the tag unless the message
// filled all `expected` bytes posted for it. The allreduces cut both sides of a transfer
// alike, so a shorter piece comes from a sender with another view of the ranks or the data
// (ranks that disagree on who is alive send under one tag), or a broken one; summing it would
// take stale scratch for the rest. (A longer one the backend refuses already.)
void wait_for_piece(Transport& transport, Request& request, std::size_t expected,
                    std::chrono::milliseconds timeout, const char* what);

}  // namespace murmur::transport
