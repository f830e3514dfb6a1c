// The libfabric backend: one RDM endpoint per rank (provider from config.ofi_provider: "tcp"
// means the layered "tcp;ofi_rxm", "shm" is shared memory), with an FI_AV_TABLE address vector
// of every other rank's endpoint name (swapped through the Bootstrap at construction) and one
// FI_CQ_FORMAT_TAGGED completion queue. Messages go through fi_tsend/fi_trecv with the source
// rank in the top bits of the tag; put() is fi_writemsg with FI_DELIVERY_COMPLETE where the
// provider has FI_RMA. Thread-compatible (FI_THREAD_DOMAIN): one thread drives the Transport.
// Error completions become PeerLost/ProtocolError naming the rank, rethrown from test()/wait().
// A peer that dies with a receive pending is seen only as the wait reaching its deadline.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <rdma/fi_tagged.h>

#include "core/config.h"
#include "transport/bootstrap.h"
#include "transport/ofi/check.h"
#include "transport/transport.h"

namespace murmur::transport::ofi {

class Transport final : public transport::Transport {
 public:
  // Opens fabric, domain, AV, CQ and endpoint for config.ofi_provider, swaps endpoint names
  // with every other rank and inserts them in the AV. Throws TransportError if no provider
  // matches or a call fails, PeerLost if a rank misses the exchange deadline.
  Transport(const TransportConfig& config, int rank, int world_size, Bootstrap& bootstrap);
  ~Transport() override;

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
  void cancel(Request& request) override;
  std::uint64_t bytes_sent() const override { return bytes_sent_; }
  std::uint64_t bytes_received() const override { return bytes_received_; }

  Tag max_tag() const { return max_tag_; }

 private:
  enum class Kind { kSend, kRecv, kPut };
  struct Op;
  // The provider's per-operation context; completions hand back its address.
  struct Context {
    fi_context2 fi;
    Op* op;
  };
  struct Op : RequestState {
    Context context{};
    Kind kind = Kind::kSend;
    std::size_t capacity = 0;
    bool cancelled = false;
  };

  void open(const TransportConfig& config);
  void check_peer(int peer, const char* what) const;
  void check_range(const transport::Region& region, ByteRange range, const char* what) const;
  std::uint64_t wire_tag(int source, Tag tag) const;
  // Posts through `post` (returns an fi_* result), progressing the CQ while it says -FI_EAGAIN.
  template <class Post>
  Request start(std::shared_ptr<Op> op, const char* call, Post post);
  void progress();
  void complete(Op& op, std::size_t length);
  void fail(Op& op, const fi_cq_err_entry& err);

  int rank_;
  int world_size_;
  std::size_t max_frame_;
  int connect_timeout_ms_;
  int rank_shift_ = 63;
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
  std::vector<fi_addr_t> addrs_;  // by rank
  std::unordered_map<Op*, std::shared_ptr<Op>> inflight_;
  std::uint64_t bytes_sent_ = 0;
  std::uint64_t bytes_received_ = 0;
};

}  // namespace murmur::transport::ofi
