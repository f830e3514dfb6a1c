// The libfabric backend: one RDM endpoint per rank (provider from config.ofi_provider: "tcp"
// means the layered "tcp;ofi_rxm", "shm" is shared memory), with an FI_AV_TABLE address vector
// of every other rank's endpoint name (swapped through the Bootstrap at construction) and one
// FI_CQ_FORMAT_TAGGED completion queue. put() is fi_writemsg with FI_DELIVERY_COMPLETE where the
// provider has FI_RMA. Thread-compatible (FI_THREAD_DOMAIN): one thread drives the Transport.
//
// Messages never reach the provider longer than the receive posted for them, because libfabric
// 1.17 mishandles truncation (tcp;ofi_rxm drops the message after a truncated eager one; shm
// never completes a truncated segmented one). Each message starts with a head under its own wire
// tag, received into a bounce slot that always fits: a message of up to Slots::kInline bytes
// travels inside its head; a longer one waits for the receiver's clear-to-send, which accepts
// (the body recv is posted into the user's range first) or refuses (ProtocolError there, and the
// body is never sent). Wire tags: source rank in the top bits, then 2 bits of kind (head, body,
// clear-to-send), then the user tag. A peer that dies is seen through Liveness (one TCP socket
// per watched peer, transport/liveness.h) and fails its pending requests with PeerLost; its
// heartbeats on that socket tell a frozen peer (silent_for) from a slow one.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "core/config.h"
#include "transport/bootstrap.h"
#include "transport/liveness.h"
#include "transport/restarts.h"
#include "transport/ofi/check.h"
#include "transport/ofi/slots.h"
#include "transport/transport.h"

namespace murmur::transport::ofi {

class Transport final : public transport::Transport {
 public:
  // Opens fabric, domain, AV, CQ and endpoint for config.ofi_provider, swaps endpoint names
  // with every other rank and inserts them in the AV. Throws TransportError if no provider
  // matches or a call fails, PeerLost if a rank misses the exchange deadline.
  Transport(const TransportConfig& config, int rank, int world_size, Bootstrap& bootstrap);
  ~Transport() override;

  // Keeps the bootstrap for the rest of the run (the one the constructor used): a rank restarted
  // into the run then meets us again through it, and progress() puts its new endpoint name in
  // the AV (revive). Without one, a restarted rank finds nobody to meet.
  void keep_bootstrap(std::unique_ptr<Bootstrap> bootstrap) { restarts_.keep(std::move(bootstrap)); }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string name() const override { return "ofi"; }
  // The provider chosen, e.g. "tcp;ofi_rxm" or "shm".
  std::string provider() const;

  std::unique_ptr<transport::Region> register_region(std::span<std::byte> bytes) override;
  Request send(int peer, Tag tag, const transport::Region& from, ByteRange range) override;
  Request recv(int peer, Tag tag, transport::Region& into, ByteRange range) override;
  bool supports_put() const override { return has_rma_; }
  Request put(int peer, const transport::Region& from, ByteRange range,
              std::span<const std::byte> remote_key, std::size_t remote_offset) override;
  bool test(Request& request) override;
  // Polls test() like the base class, yielding the core between idle polls: ranks outnumbering
  // cores (8 on 2 here) otherwise spin away the time slices their peers need to answer.
  bool wait(Request& request, Deadline deadline) override;
  void cancel(Request& request) override;
  std::uint64_t bytes_sent() const override { return bytes_sent_; }
  std::uint64_t bytes_received() const override { return bytes_received_; }
  std::optional<Clock::duration> silent_for(int peer) const override {
    return liveness_.silent_for(peer);
  }
  // Closes the liveness sockets between us and `peer`: it finds us lost at once. For a revived
  // rank whose old process had not been dropped, it is that drop (lost_until_dropped_).
  void drop(int peer) override;

  Tag max_tag() const { return max_tag_; }
  int tag_bits() const override { return kind_shift_; }

 private:
  enum class Kind { kSend, kRecv, kPut };
  enum class Wire : std::uint64_t { kHead = 0, kBody = 1, kClear = 2 };
  // What one provider operation of an Op does; its completion handler switches on it.
  enum class Step { kSmall, kHead, kClear, kBody, kPut };
  struct Op;
  // The provider's per-operation context; completions hand back its address.
  struct Context {
    fi_context2 fi;
    Op* op = nullptr;
    int index = 0;
  };
  // One pending send, recv or put: up to two provider operations at a time (ctx[0], ctx[1]).
  struct Op : RequestState {
    Kind kind = Kind::kSend;
    Context ctx[2];
    Step step[2] = {Step::kSmall, Step::kSmall};
    bool posted[2] = {false, false};
    int remaining = 0;          // provider operations posted or queued; released at 0
    std::byte* user = nullptr;  // the caller's range
    void* user_desc = nullptr;
    std::size_t capacity = 0;   // recv: bytes the range accepts
    std::size_t length = 0;     // the message's length
    Slots::Slot slot[2];
    fi_rma_iov rma{};           // put: the target
    std::exception_ptr refused; // recv: raised once the refusal has been sent
    bool cancelled = false;
  };
  // A provider operation waiting to be posted, in order (posts that met -FI_EAGAIN stay here).
  struct Post {
    Op* op;
    int index;
    Step step;
    enum { kSend, kRecv, kWrite } call;
    void* buf;
    std::size_t len;
    void* desc;
    std::uint64_t wire;
  };

  void open(const TransportConfig& config);
  void check_peer(int peer, const char* what) const;
  void check_range(const transport::Region& region, ByteRange range, const char* what) const;
  std::uint64_t wire_tag(int source, Wire kind, Tag tag) const;
  std::shared_ptr<Op> make_op(Kind kind, int peer, Tag tag);
  Request begin(std::shared_ptr<Op> op);
  void enqueue(Op& op, int index, Step step, decltype(Post::kSend) call, void* buf,
               std::size_t len, void* desc, std::uint64_t wire);
  ssize_t post(Post& p);
  void flush();
  void progress();
  void on_complete(Context& ctx, std::size_t length);
  void on_head(Op& op, std::size_t length);
  void on_clear(Op& op);
  void on_error(Context& ctx, const fi_cq_err_entry& err);
  void settle(Op& op);
  void abort(Op& op, std::exception_ptr error);
  void check_liveness();
  // Fails every pending request of rank `r` with a PeerLost saying `why`, and marks it lost.
  void lose(int r, const std::string& why);
  // Rank `r` was restarted and sent `blob` (its liveness prefix and endpoint name): fails what
  // was pending with its old process and addresses the new one from now on.
  void revive(int r, std::vector<std::byte> blob);

  int rank_;
  int world_size_;
  std::size_t max_frame_;
  int connect_timeout_ms_;
  int rank_shift_ = 63;
  int kind_shift_ = 61;
  Tag max_tag_ = 0;
  std::uint64_t mr_mode_ = 0;
  std::size_t max_msg_size_ = 0;
  bool has_rma_ = false;
  std::uint64_t next_key_ = 1;
  Info info_;
  Fabric fabric_;
  Domain domain_;
  AddressVector av_;
  CompletionQueue cq_;
  Endpoint ep_;
  std::unique_ptr<Slots> slots_;  // registered in domain_, closed before it
  std::vector<fi_addr_t> addrs_;  // by rank
  std::unordered_map<Op*, std::shared_ptr<Op>> inflight_;
  std::deque<Post> posts_;
  transport::Liveness liveness_;
  std::vector<bool> lost_;         // by rank: its requests have been failed
  std::vector<std::string> missed_;  // by rank: why the bootstrap did not meet it at setup
  std::vector<bool> dropped_;  // by rank: drop() was called for its current process
  // By rank: revived before the caller gave the old process up (drop): every request fails as
  // if it were still lost until it does, so that it marks the rank dead before it talks to the
  // new process; that drop is about the old process, and does not cut the new one off.
  std::vector<bool> lost_until_dropped_;
  Restarts restarts_;  // the kept bootstrap (keep_bootstrap), for restarted ranks
  std::uint64_t bytes_sent_ = 0;
  std::uint64_t bytes_received_ = 0;
};

}  // namespace murmur::transport::ofi
