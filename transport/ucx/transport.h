// The UCX (UCP) backend: one context (TAG | RMA) and one worker in single-thread mode, endpoints
// to a fixed set of peers whose worker addresses are swapped through a Bootstrap when the
// Transport is built (the set is all other ranks unless the caller names fewer). Tagged messages
// use ucp_tag_send_nbx/ucp_tag_recv_nbx with the source rank in the top bits of the UCP tag, and
// put() uses ucp_put_nbx followed by an endpoint flush, so a finished put is visible remotely.
// Thread-compatible: the one thread that drives the Transport also drives ucp_worker_progress.
// Endpoint failures (err_cb) are recorded and rethrown as PeerLost from the next test()/wait().
// Beside UCX, every peer is watched over a Liveness socket (transport/liveness.h), whose address
// rides in front of the worker address: a process that dies is lost even where UCX's transports
// cannot tell, and its heartbeats tell a frozen peer (silent_for) from a slow one.
// Error mode PEER (config.ucx_peer_failure, the default) makes a dead peer PeerLost but rules out
// UCX 1.13's posix/sysv shared memory (cma and tcp remain); ucx_peer_failure: false uses mode
// NONE, shared memory included, and a dead peer shows only as a wait reaching its deadline (as
// it does when UCX_TLS leaves no transport that detects peer failure).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ucp/api/ucp.h>

#include "core/config.h"
#include "transport/bootstrap.h"
#include "transport/liveness.h"
#include "transport/restarts.h"
#include "transport/transport.h"
#include "transport/ucx/check.h"

namespace murmur::transport::ucx {

class Transport final : public transport::Transport {
 public:
  // Creates the context and worker, swaps worker addresses with `peers` (ascending, distinct,
  // not `rank`) and connects to each. Throws TransportError if UCX fails, PeerLost if a peer
  // does not answer the exchange or the wire-up within config.connect_timeout_ms.
  Transport(const TransportConfig& config, int rank, int world_size, Bootstrap& bootstrap,
            std::span<const int> peers);
  ~Transport() override;

  // Keeps the bootstrap for the rest of the run (it must be the one the constructor used): a
  // peer restarted into the run then meets us again through it, and progress() gives it a new
  // endpoint (revive). Without one, a restarted peer finds nobody to meet.
  void keep_bootstrap(std::unique_ptr<Bootstrap> bootstrap) { restarts_.keep(std::move(bootstrap)); }

  // Flushes and closes every endpoint (pending operations are failed). Throws TransportError
  // if UCX reports an error other than a lost peer; the destructor calls it and swallows that.
  void close();

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string name() const override { return "ucx"; }

  std::unique_ptr<transport::Region> register_region(std::span<std::byte> bytes) override;
  Request send(int peer, Tag tag, const transport::Region& from, ByteRange range) override;
  Request recv(int peer, Tag tag, transport::Region& into, ByteRange range) override;
  // True iff this UCX context reports UCS_MEMORY_TYPE_CUDA among its memory types (a UCX
  // built with its cuda transports, with a CUDA driver present).
  bool supports_device_memory() const override { return cuda_memory_; }
  std::unique_ptr<transport::Region> register_device_region(std::span<std::byte> bytes) override;
  bool supports_put() const override { return true; }
  Request put(int peer, const transport::Region& from, ByteRange range,
              std::span<const std::byte> remote_key, std::size_t remote_offset) override;
  bool test(Request& request) override;
  void cancel(Request& request) override;
  std::optional<Clock::duration> silent_for(int peer) const override {
    return liveness_.silent_for(peer);
  }
  // Closes the liveness sockets between us and `peer`: it finds us lost at once. For a revived
  // rank whose old process had not been dropped, it is that drop (Peer::lost_until_dropped).
  void drop(int peer) override;
  std::uint64_t bytes_sent() const override { return bytes_sent_; }
  std::uint64_t bytes_received() const override { return bytes_received_; }

  // The largest user Tag this world can carry (the rest of the 64 bits name the source rank).
  Tag max_tag() const { return max_tag_; }
  int tag_bits() const override { return rank_shift_; }

 private:
  enum class Kind { kSend, kRecv, kPut };
  // One pending operation; owned by inflight_ until UCX has released every request of it.
  struct Op : RequestState {
    Kind kind = Kind::kSend;
    Transport* owner = nullptr;
    void* ucp[2] = {nullptr, nullptr};  // UCX requests still outstanding (put: put + flush)
    int outstanding = 0;                // callbacks still to come
    ucs_status_t status = UCS_OK;       // first failure reported by UCX
    std::size_t capacity = 0;           // recv: bytes the posted buffer holds
    bool cancelled = false;
  };
  // An endpoint to one peer; err_cb stores the failure here (never throws across UCX).
  struct Peer {
    Transport* owner = nullptr;
    int rank = -1;
    ucp_ep_h ep = nullptr;
    ucs_status_t failure = UCS_OK;  // set by err_cb (or check_liveness)
    bool by_liveness = false;       // the loss came from the liveness socket, not from UCX
    bool handles_errors = false;    // made in error mode PEER: may be closed by force
    bool restarted = false;         // the loss: a new process of its rank met us (revive)
    std::exception_ptr lost;        // PeerLost, built on the driving thread from `failure`
    bool dropped = false;           // drop() was called for this process
    // Revived before the caller gave the old process up (drop): every request fails with the
    // old loss until it does, so that it marks the rank dead before it talks to the new process
    // (and membership then takes it back); that drop is about the old process, and does not cut
    // the new one off.
    std::exception_ptr lost_until_dropped;
  };

  static void on_send(void* request, ucs_status_t status, void* user_data);
  static void on_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                      void* user_data);
  static void on_peer_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  Peer& peer_for(int peer, const char* what);
  ucp_tag_t wire_tag(int source, Tag tag) const;
  void check_range(const transport::Region& region, ByteRange range, const char* what) const;
  // Registers `op` with its UCX request (or its immediate result) and returns the handle.
  Request track(std::shared_ptr<Op> op, ucs_status_ptr_t result, int slot);
  // A request that fails with `error` at its first test().
  Request failed(std::shared_ptr<Op> op, std::exception_ptr error);
  void progress();
  void check_liveness();
  void sweep();
  void finish(Op& op);
  // Endpoints to `peers` at `addrs`; a peer the bootstrap missed (`missed` says why) has none.
  void connect_all(std::span<const int> peers, std::span<const std::vector<std::byte>> addrs,
                   std::span<const std::string> missed, Deadline deadline);
  // An endpoint to rank `r` at worker `address`, in the error mode the config asks for.
  std::unique_ptr<Peer> make_peer(int r, std::span<const std::byte> address);
  // Rank `r`, not met at setup (dead, or left the run): lost, with no endpoint, until it is
  // restarted and meets us (revive).
  std::unique_ptr<Peer> missing_peer(int r, const std::string& why);
  // Rank `r` was restarted and sent `blob` (its liveness prefix and worker address): fails what
  // was pending with its old process, closes the old endpoint, connects to the new worker.
  void revive(int r, std::vector<std::byte> blob);
  // The stored loss of `p` for a new request, if any (lost, or lost_until_dropped).
  std::exception_ptr loss_for(Peer& p);
  void close_endpoints(Deadline deadline, bool force) noexcept;
  ucp_rkey_h remote_key_for(Peer& peer, std::span<const std::byte> packed);

  int rank_;
  int world_size_;
  std::size_t max_frame_;
  int connect_timeout_ms_;
  bool peer_failure_ = true;  // endpoints in UCP_ERR_HANDLING_MODE_PEER
  bool cuda_memory_ = false;  // ucp_context_query lists UCS_MEMORY_TYPE_CUDA
  int rank_shift_ = 63;
  Tag max_tag_ = 0;
  Liveness liveness_;  // before the worker: it outlives every endpoint
  Context context_;
  Worker worker_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; null for ranks not connected
  // Endpoints of processes that were restarted: UCX may still call back with their address.
  std::vector<std::unique_ptr<Peer>> retired_;
  Restarts restarts_;  // the kept bootstrap (keep_bootstrap), for restarted ranks
  std::map<std::pair<int, std::vector<std::byte>>, RemoteKey> rkeys_;  // unpacked per peer
  std::unordered_map<Op*, std::shared_ptr<Op>> inflight_;
  std::vector<Op*> completed_;   // filled by callbacks during progress, drained by sweep
  std::vector<Peer*> failed_;    // filled by err_cb, drained by sweep
  std::uint64_t bytes_sent_ = 0;
  std::uint64_t bytes_received_ = 0;
  bool closed_ = false;
  bool warned_no_failure_detection_ = false;
};

}  // namespace murmur::transport::ucx
