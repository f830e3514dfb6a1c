// The one interface every backend (tcp, ucx, ofi, inproc) implements: ranks of one world moving
// byte ranges by tag, with completion objects, and one-sided put where the backend supports it.
// Thread-compatible: one thread (the peer's communication thread) drives a Transport; completions
// are polled through test()/wait(), never called back into user code. Failures detected inside
// callbacks are stored on the request or endpoint and rethrown from the next test()/wait().
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace murmur::transport {

using Tag = std::uint64_t;
using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadline_after(std::chrono::milliseconds ms) { return Clock::now() + ms; }

// A sub-range of a Region, in bytes.
struct ByteRange {
  std::size_t offset = 0;
  std::size_t size = 0;
};

// Memory made reachable by peers (UCX memh / libfabric MR); the bytes must outlive the Region.
// Backends without registration (tcp, inproc) use this base class as is.
class Region {
 public:
  explicit Region(std::span<std::byte> bytes) : bytes_(bytes) {}
  virtual ~Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  std::span<std::byte> bytes() const { return bytes_; }
  // Opaque bytes a peer needs to put() into this region (rkey, MR key and address); empty
  // where the backend has no one-sided put.
  virtual std::vector<std::byte> remote_key() const { return {}; }

 private:
  std::span<std::byte> bytes_;
};

// Shared state of one pending operation. Backends derive from it to keep their handles.
struct RequestState {
  virtual ~RequestState() = default;
  int peer = -1;
  Tag tag = 0;
  std::atomic<bool> done{false};
  std::size_t bytes = 0;       // bytes actually moved (a recv may get fewer than its range)
  std::exception_ptr error;    // set instead of throwing across a callback
};

// A handle to a pending send, recv or put. Cheap to copy; completion is observed by
// Transport::test/wait.
class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<RequestState> state) : state_(std::move(state)) {}
  bool valid() const { return state_ != nullptr; }
  RequestState* state() const { return state_.get(); }
  std::shared_ptr<RequestState> shared() const { return state_; }

 private:
  std::shared_ptr<RequestState> state_;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // "tcp", "ucx", "ofi" or "inproc", for logs and benchmarks.
  virtual std::string name() const = 0;
  // How many low bits of a Tag this backend carries (the rest must be 0): 64 where tags travel
  // whole (tcp, inproc); fewer where the backend keeps the source rank in its own tag (ucx,
  // ofi). transport/tag.h lays murmur's tags out within them.
  virtual int tag_bits() const { return 64; }

  // Makes `bytes` reachable by peers; register the parameter arena once and reuse the Region.
  virtual std::unique_ptr<Region> register_region(std::span<std::byte> bytes) = 0;

  // Starts sending `range` of `from` to `peer` under `tag`. The bytes must stay untouched until
  // the request completes (nothing is copied on the way out).
  virtual Request send(int peer, Tag tag, const Region& from, ByteRange range) = 0;
  // Starts receiving a message from `peer` under `tag` into `range` of `into`. A message longer
  // than the range is a ProtocolError; a shorter one completes with request.state()->bytes set.
  virtual Request recv(int peer, Tag tag, Region& into, ByteRange range) = 0;

  // True iff send() and recv() accept Regions of CUDA device memory (made by
  // register_device_region): UCX built with a CUDA transport says so; the rest copy bytes with
  // the CPU and never do.
  virtual bool supports_device_memory() const { return false; }
  // Like register_region, for `bytes` in CUDA device memory (never touched by the CPU). Throws
  // TransportError unless supports_device_memory().
  virtual std::unique_ptr<Region> register_device_region(std::span<std::byte> bytes);

  // True iff the backend implements put() (one-sided RMA).
  virtual bool supports_put() const { return false; }
  // Writes `range` of `from` into the peer's region described by `remote_key` at `remote_offset`.
  virtual Request put(int peer, const Region& from, ByteRange range,
                      std::span<const std::byte> remote_key, std::size_t remote_offset);

  // Drives progress once; returns true iff `request` has completed. Throws the stored error
  // (PeerLost, ProtocolError, TransportError) if it failed.
  virtual bool test(Request& request) = 0;
  // Returns true iff `request` completed before `deadline`; false at the deadline (the request
  // stays pending). Throws as test() does. By default polls test(): right for backends whose
  // progress is driven by the caller (ucx, ofi); tcp and inproc block on their own events.
  virtual bool wait(Request& request, Deadline deadline);
  // Gives up on a pending request (after a timeout) so that its buffer may be reused. (ucx
  // cannot withdraw a send that has started: it abandons it, and the peer, which never matched
  // it, never will, since no tag is reused within a run.)
  virtual void cancel(Request& request) = 0;

  // How long `peer` has sent nothing at all (not a message, not a heartbeat), for backends that
  // keep their connections alive with heartbeats (tcp's frames; ucx's and ofi's liveness
  // sockets, transport/liveness.h); nullopt where the backend cannot tell a silent peer from a
  // busy one (inproc). Tells a dead, frozen or cut-off peer from a slow one.
  virtual std::optional<Clock::duration> silent_for(int peer) const { return std::nullopt; }
  // Gives `peer` up for dead: closes what connects us (tcp's connection, ucx's and ofi's
  // liveness sockets), so that its end finds us gone too instead of waiting on a rank that no
  // longer talks to it. inproc does nothing.
  virtual void drop(int peer) {}

  // Byte counters since construction, for metrics.
  virtual std::uint64_t bytes_sent() const = 0;
  virtual std::uint64_t bytes_received() const = 0;
};

// Waits for every request in turn; throws the first failure. Returns false if the deadline
// passed before all completed.
bool wait_all(Transport& transport, std::span<Request> requests, Deadline deadline);

// How a wait_heard ended.
enum class WaitEnd { kDone, kSilent, kTimedOut };
// Waits for `request` until it completes (kDone), or its peer has been silent (silent_for) for
// `silence` (kSilent), or `timeout` has passed since the call (kTimedOut): a live peer that is
// slow to send is waited for, up to `timeout`; a dead or cut-off one is given up after `silence`.
// Where the backend cannot tell (silent_for is nullopt), the peer counts as silent from the call
// on. Throws as wait() does; the request stays pending unless kDone.
WaitEnd wait_heard(Transport& transport, Request& request, std::chrono::milliseconds silence,
                   std::chrono::milliseconds timeout);

}  // namespace murmur::transport
