// PutWindows: one-sided delivery of a push algorithm's messages, as BlueFog's win_put does over
// MPI windows, here over ucx's ucp_put_nbx and libfabric's fi_write (Transport::put). Every peer
// exposes one registered window with a slot per (in-neighbor, round in flight); an in-neighbor
// writes its message straight into its slot, and once the write has landed in our memory (ucx's
// flush, ofi's delivery-complete) it sends a 24-byte notice: the round, the length and the
// CRC32C of what it wrote. The receiver checks the notice and the slot's bytes against it before
// it uses them (the window is written by the network: untrusted), and acks once it has, which
// frees the slot for that sender's next write there. So no message is copied on arrival, none
// waits unmatched in the transport, and a slot is never overwritten before it is read.
//
// Keys (each window's remote key and each sender's offset in it) are exchanged once, when every
// peer makes its PutWindows, with the union of its in- and out-neighbors over the schedule. A
// restarted peer would bring a new window that its neighbors know nothing of: algorithms on this
// path do not take a peer back (optimizers/algorithms.cc, rejoin_policy). A lost peer is skipped
// as the Neighborhood says, as on the two-sided path. Host memory only. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/config.h"
#include "device/device.h"
#include "membership/neighborhood.h"
#include "transport/tag.h"

namespace murmur::optimizers {

class PutWindows {
 public:
  // Messages of `floats` floats; round t uses slot t % `slots`. `sources` may write to us,
  // `targets` are written to (ascending, without this rank). Exchanges keys with all of them
  // under `purpose`: every peer must make its PutWindows at the same point of the run. Throws
  // ConfigError (naming algorithm.one_sided) unless the transport has put() and `device` host
  // memory.
  PutWindows(membership::Neighborhood& hood, device::Device& device, std::size_t floats,
             int slots, std::vector<int> sources, std::vector<int> targets, unsigned purpose);
  ~PutWindows();
  PutWindows(const PutWindows&) = delete;
  PutWindows& operator=(const PutWindows&) = delete;

  // Starts writing `range` of `from` (floats() floats, whose CRC32C is `crc`) into `peer`'s slot
  // for `round`; first waits for `peer`'s ack of the round that used that slot before. False if
  // `peer` is lost. The bytes must stay untouched until wait_sent(round).
  bool put(int peer, std::int64_t round, const transport::Region& from, transport::ByteRange range,
           std::uint32_t crc);
  // Sends the notice of every put that has landed; waits first for the puts of rounds up to
  // `through` (none by default). Before blocking on round r, a peer sends every notice up to r:
  // then no two peers wait on each other, since each waits on a round the other has passed.
  void progress(std::int64_t through = -1);
  // Waits until every put of `round` has landed (so its source bytes may be reused).
  void wait_sent(std::int64_t round);

  // Posts the receive of `source`'s notice for `round` (giving up the one of the round that
  // used the slot before, if that was never released: its sender was lost).
  void expect(int source, std::int64_t round);
  // Waits for `source`'s message of `round` (after expect) and returns it, checked against its
  // notice; empty if `source` was lost. Throws ProtocolError naming `source` and the field at
  // fault. The floats stay valid until release().
  std::span<const float> landed(int source, std::int64_t round);
  // Gives `source`'s slot of `round` back to it (sends the ack).
  void release(int source, std::int64_t round);

  // Waits until every put has landed and been acked, and every ack we owe has left: before the
  // run ends or checkpoints.
  void finish();

  std::size_t floats() const { return floats_; }
  // The window's size in bytes (sources x slots x a 256-byte aligned message), for logs.
  std::size_t window_bytes() const;

 private:
  struct OutSlot {
    std::int64_t round = -1;
    transport::Request put, notice, ack;
    bool noticed = true;  // the notice of `round` has been sent (or there is none to send)
  };
  struct Out {
    int peer = -1;
    bool lost = false;
    std::vector<std::byte> key;  // the peer's window
    std::uint64_t offset = 0;    // our area in it
    std::vector<OutSlot> slots;
  };
  struct InSlot {
    std::int64_t round = -1;
    transport::Request notice, ack;
    bool released = true;
  };
  struct In {
    int peer = -1;
    std::vector<InSlot> slots;
  };

  Out& out_of(int peer);
  In& in_of(int peer);
  // Where the small messages of (target or source index, slot) live in small_.
  transport::ByteRange out_notice(std::size_t i, std::size_t s) const;
  transport::ByteRange out_ack(std::size_t i, std::size_t s) const;
  transport::ByteRange in_notice(std::size_t j, std::size_t s) const;
  transport::ByteRange in_ack(std::size_t j, std::size_t s) const;
  void send_notice(Out& out, std::size_t i, std::size_t s);
  void exchange_keys();

  membership::Neighborhood& hood_;
  transport::Transport& transport_;
  device::Device& device_;
  std::size_t floats_, stride_;  // stride_: floats per slot, 256-byte aligned
  std::size_t slots_;
  transport::TagLayout layout_;
  unsigned purpose_;
  std::vector<Out> outs_;
  std::vector<In> ins_;
  device::Array window_;
  std::unique_ptr<transport::Region> window_region_;
  std::vector<std::byte> small_;  // notices and acks, both ways
  std::unique_ptr<transport::Region> small_region_;
};

// The ranks that send to (`sources`) and receive from (`targets`) `rank` in any round of
// `topology`'s schedule: the union over its period, or every other rank where it has none
// (random graphs).
void schedule_neighbors(const TopologyConfig& topology, int n, int rank, std::uint64_t seed,
                        std::vector<int>& sources, std::vector<int>& targets);

}  // namespace murmur::optimizers
