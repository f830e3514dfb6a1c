// A sparse allreduce (SparCML, Renggli et al. 2019, its recursive-doubling "SSAR" form): each
// rank contributes a sparse vector of n floats, given as (index, value) pairs, and every rank
// ends with the sum (or mean) over ranks. The pairs travel while the merged result is sparse;
// once a merge fills half the vector (where pairs, 8 bytes each, would cost more than the
// dense 4 bytes per float), the representation switches to dense and stays so.
//
// Ranks are numbered as in the halving-doubling allreduce (collectives.h): N = p + q with p the
// largest power of two <= N; the first 2q indices pair up and the even one folds its vector
// into the odd one (step 0) and takes the result back at the end. The p others double: at
// level k, v and v ^ 2^k swap what they hold and both keep the merge. Float addition is
// commutative, so both partners hold the bitwise same merge, and at the end every rank holds
// the bitwise same result.
//
// Network input is untrusted: every message carries a 16-byte header (magic, format, count,
// CRC32C of the payload, little-endian) and is checked (its size against the count, the
// payload's CRC, indices strictly ascending and below n) before a float of it is used.
// Host memory only. Called by the thread that drives the transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "transport/collectives.h"
#include "transport/transport.h"

namespace murmur::transport {

// What one run moved, for benchmarks and metrics.
struct SparseAllreduceStats {
  std::size_t result_nonzeros = 0;  // entries of the merged result (n where it went dense)
  bool went_dense = false;          // some merge filled half the vector
  int dense_from_level = -1;        // the doubling level where it switched; -1 never
  std::uint64_t bytes_sent = 0;     // by this rank, headers included
};

class SparseAllreduce {
 public:
  // Messages above `n` floats' worth are refused as malformed; `n` is fixed per instance
  // (its buffers are registered once).
  SparseAllreduce(Transport& transport, std::size_t n, CollectiveOptions options = {});
  ~SparseAllreduce();
  SparseAllreduce(const SparseAllreduce&) = delete;
  SparseAllreduce& operator=(const SparseAllreduce&) = delete;

  std::size_t size() const { return n_; }

  // This rank's contribution: value[j] at index[j], indices strictly ascending and < n.
  // Writes the sum (or mean) over ranks into `out` (n floats, zeros where no rank had an entry).
  // Every rank calls it with the same tag (a base tag of tag.h; levels number its step field).
  // Throws PeerLost naming a rank that did not answer in time, ProtocolError naming the rank
  // whose message failed a check.
  SparseAllreduceStats run(std::span<const std::uint32_t> index, std::span<const float> value,
                           std::span<float> out, ReduceOp op, Tag tag);

  // Bytes of a message carrying `pairs` entries, sparse (for cost estimates and tests).
  static std::size_t sparse_message_bytes(std::size_t pairs);
  // The largest number of pairs kept sparse for a vector of n floats: a merge with more
  // switches to dense.
  static std::size_t max_sparse_pairs(std::size_t n) { return n / 2; }

 private:
  void exchange(int peer, std::uint64_t step, bool send, bool receive, Tag tag,
                SparseAllreduceStats& stats);
  void encode(std::span<std::byte> into, std::size_t* bytes) const;
  void merge_received(int peer, std::size_t bytes, std::uint64_t step);

  Transport& transport_;
  std::size_t n_;
  CollectiveOptions options_;
  std::vector<std::byte> send_buf_, recv_buf_;  // header + at most n floats each
  std::unique_ptr<Region> send_region_, recv_region_;
  // The held vector: sparse while dense_ is false.
  bool dense_ = false;
  std::vector<std::uint32_t> index_, merged_index_;
  std::vector<float> value_, merged_value_, dense_values_;
};

}  // namespace murmur::transport
