// Setup and teardown of the UCX backend: context, worker, address swap, endpoints, regions.
#include "transport/ucx/transport.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "transport/ucx/region.h"

namespace murmur::transport::ucx {
namespace {

std::string peer_name(int rank) { return fmt::format("ucx: rank {}", rank); }

}  // namespace

Transport::Transport(const TransportConfig& config, int rank, int world_size,
                     Bootstrap& bootstrap, std::span<const int> peers)
    : rank_(rank),
      world_size_(world_size),
      max_frame_(static_cast<std::size_t>(config.max_frame_bytes)),
      connect_timeout_ms_(config.connect_timeout_ms),
      peer_failure_(config.ucx_peer_failure),
      liveness_(config.host, std::chrono::milliseconds(config.peer_timeout_ms), rank) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw TransportError(fmt::format("ucx: rank {} is outside a world of {}", rank, world_size));
  }
  // The source rank lives in the top bits of the UCP tag; the user Tag gets the rest.
  const int rank_bits = std::max(1, static_cast<int>(std::bit_width(
                                        static_cast<unsigned>(world_size - 1))));
  rank_shift_ = 64 - rank_bits;
  max_tag_ = (Tag{1} << rank_shift_) - 1;

  // NULL env prefix and file: UCX_TLS, UCX_NET_DEVICES, UCX_RNDV_THRESH... keep working.
  ucp_config_t* raw_config = nullptr;
  MURMUR_UCS_CHECK(ucp_config_read(nullptr, nullptr, &raw_config));
  Config ucp_config(raw_config);

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
  params.mt_workers_shared = 0;
  params.estimated_num_eps = peers.size();
  ucp_context_h context = nullptr;
  MURMUR_UCS_CHECK(ucp_init(&params, ucp_config.get(), &context));
  context_.reset(context);
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  MURMUR_UCS_CHECK(ucp_context_query(context_.get(), &attr));
  cuda_memory_ = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;

  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker = nullptr;
  MURMUR_UCS_CHECK(ucp_worker_create(context_.get(), &worker_params, &worker));
  worker_.reset(worker);

  ucp_address_t* raw_address = nullptr;
  std::size_t address_size = 0;
  MURMUR_UCS_CHECK(ucp_worker_get_address(worker_.get(), &raw_address, &address_size));
  WorkerAddress address(raw_address, WorkerAddressFree{worker_.get()});
  std::span<const std::byte> mine(reinterpret_cast<const std::byte*>(raw_address), address_size);

  const Deadline deadline = deadline_after(std::chrono::milliseconds(config.connect_timeout_ms));
  const std::vector<std::byte> blob = liveness_.prefixed(mine, config.host);
  restarts_.remember(peers, blob);
  std::vector<std::string> missed;
  std::vector<std::vector<std::byte>> theirs =
      bootstrap.exchange_with_live(peers, blob, deadline, missed);
  if (theirs.size() != peers.size() || missed.size() != peers.size()) {
    throw TransportError(fmt::format("ucx: bootstrap returned {} addresses for {} peers",
                                     theirs.size(), peers.size()));
  }
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (missed[i].empty()) liveness_.take_address(peers[i], theirs[i], "ucx");
  }
  connect_all(peers, theirs, missed, deadline);
  for (int r : peers) liveness_.watch(r);  // a missed rank has no address: not watched
}

void Transport::connect_all(std::span<const int> peers,
                            std::span<const std::vector<std::byte>> addrs,
                            std::span<const std::string> missed, Deadline deadline) {
  peers_.resize(world_size_);
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const int r = peers[i];
    if (r < 0 || r >= world_size_ || r == rank_ || peers_[r]) {
      throw TransportError(fmt::format("ucx: bad peer list entry {} (rank {} of {})", r, rank_,
                                       world_size_));
    }
    peers_[r] = missed[i].empty() ? make_peer(r, addrs[i]) : missing_peer(r, missed[i]);
  }
  // Flushing each endpoint completes the wire-up now, so that a missing peer shows at setup
  // and the first timed transfer does not pay for it.
  std::vector<std::pair<Peer*, void*>> flushes;
  for (auto& p : peers_) {
    if (!p || p->ep == nullptr) continue;  // none: not met (missing_peer)
    ucp_request_param_t param{};
    ucs_status_ptr_t req = ucp_ep_flush_nbx(p->ep, &param);
    if (UCS_PTR_IS_ERR(req)) throw_ucs(UCS_PTR_STATUS(req), "ucp_ep_flush_nbx", __FILE__, __LINE__);
    if (req != nullptr) flushes.emplace_back(p.get(), req);
  }
  for (auto& [peer, req] : flushes) {
    ucs_status_t status;
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
      ucp_worker_progress(worker_.get());
      if (Clock::now() >= deadline) {
        throw PeerLost(fmt::format("{}: wire-up did not finish within {} ms", peer_name(peer->rank),
                                   connect_timeout_ms_));
      }
    }
    ucp_request_free(req);
    if (status != UCS_OK) {
      throw PeerLost(fmt::format("{}: wire-up failed: {}", peer_name(peer->rank),
                                 ucs_status_string(status)));
    }
  }
}

std::unique_ptr<Transport::Peer> Transport::missing_peer(int r, const std::string& why) {
  auto peer = std::make_unique<Peer>();
  peer->owner = this;
  peer->rank = r;
  peer->failure = UCS_ERR_UNREACHABLE;
  peer->lost = std::make_exception_ptr(
      PeerLost(fmt::format("ucx: rank {} lost: not met at start: {}", r, why)));
  spdlog::warn("ucx: rank {}: did not meet rank {} at start ({}); it counts as lost until it "
               "comes back", rank_, r, why);
  return peer;
}

std::unique_ptr<Transport::Peer> Transport::make_peer(int r, std::span<const std::byte> address) {
  auto peer = std::make_unique<Peer>();
  peer->owner = this;
  peer->rank = r;
  ucp_ep_params_t ep_params{};
  ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                         UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep_params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep_params.err_handler.cb = &Transport::on_peer_error;
  ep_params.err_handler.arg = peer.get();
  if (!peer_failure_) {
    // transport.ucx_peer_failure: false. Mode NONE lets UCX use posix/sysv shared memory
    // (faster for small and medium messages on one host); a dead peer is then a timeout.
    ep_params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    ep_params.field_mask &= ~UCP_EP_PARAM_FIELD_ERR_HANDLER;
  }
  ucs_status_t status = ucp_ep_create(worker_.get(), &ep_params, &peer->ep);
  peer->handles_errors = peer_failure_ && status == UCS_OK;
  if (status == UCS_ERR_UNREACHABLE && peer_failure_) {
    // UCX 1.13's shared-memory transports (posix, sysv) have no peer-failure handler, so
    // PEER mode finds no lane when UCX_TLS names only those. Connect without it: a dead
    // peer then shows as a wait that reaches its deadline, not as PeerLost.
    ep_params.field_mask &= ~(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                              UCP_EP_PARAM_FIELD_ERR_HANDLER);
    status = ucp_ep_create(worker_.get(), &ep_params, &peer->ep);
    if (status == UCS_OK && !warned_no_failure_detection_) {
      warned_no_failure_detection_ = true;
      spdlog::warn("ucx: rank {}: no transport in UCX_TLS detects peer failure; a lost peer "
                   "will only show as a timeout", rank_);
    }
  }
  if (status != UCS_OK) {
    throw_ucs(status, "ucp_ep_create(worker_.get(), &ep_params, &peer->ep)", __FILE__, __LINE__);
  }
  return peer;
}

Transport::~Transport() {
  try {
    close();
  } catch (...) {
    // Best effort: a destructor must not throw; close_endpoints already forced what it could.
  }
  // The worker goes before inflight_: any callback it still fires finds its Op alive.
  worker_.reset();
  context_.reset();
}

void Transport::close() {
  if (closed_ || !worker_) return;
  closed_ = true;
  // Receives are posted on the worker, not on an endpoint: cancel them so that UCX stops
  // writing into buffers that the caller is about to free.
  for (auto& [op, state] : inflight_) {
    if (op->kind == Kind::kRecv && op->ucp[0] != nullptr) ucp_request_cancel(worker_.get(), op->ucp[0]);
  }
  rkeys_.clear();  // rkeys are unpacked on endpoints: destroy them first
  close_endpoints(deadline_after(std::chrono::milliseconds(std::min(connect_timeout_ms_, 2000))),
                  false);
  progress();
  for (auto& [op, state] : inflight_) {
    if (!op->done) {
      op->error = std::make_exception_ptr(TransportError("ucx: transport closed"));
      op->done = true;
    }
  }
}

void Transport::close_endpoints(Deadline deadline, bool force) noexcept {
  // A send or put still with UCX (abandoned by cancel(): its peer never took it) would keep a
  // flushing close waiting, and UCX asserts if a worker goes with it still on an endpoint.
  std::vector<bool> holds_send(static_cast<std::size_t>(world_size_), false);
  for (auto& [op, state] : inflight_) {
    if (op->kind != Kind::kRecv && op->peer >= 0 && op->peer < world_size_) holds_send[op->peer] = true;
  }
  std::vector<void*> closing;
  for (auto& p : peers_) {
    if (!p || p->ep == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // A failed endpoint may only be closed by force, and only one made in error mode PEER may.
    const bool by_force = force || p->failure != UCS_OK || holds_send[p->rank];
    param.flags = by_force && p->handles_errors ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t req = ucp_ep_close_nbx(p->ep, &param);
    p->ep = nullptr;
    if (req != nullptr && !UCS_PTR_IS_ERR(req)) closing.push_back(req);
  }
  for (void* req : closing) {
    while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < deadline) {
      ucp_worker_progress(worker_.get());
    }
    ucp_request_free(req);  // still pending at the deadline: UCX releases it on completion
  }
}

void Transport::on_peer_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  if (peer->failure != UCS_OK) return;
  peer->failure = status;
  peer->owner->failed_.push_back(peer);
}

Transport::Peer& Transport::peer_for(int peer, const char* what) {
  if (closed_) throw TransportError(fmt::format("ucx: {} to rank {}: transport closed", what, peer));
  if (peer < 0 || peer >= world_size_ || !peers_[peer]) {
    throw TransportError(fmt::format("ucx: {}: rank {} is not a connected peer of rank {}", what,
                                     peer, rank_));
  }
  return *peers_[peer];
}

std::unique_ptr<transport::Region> Transport::register_region(std::span<std::byte> bytes) {
  return std::make_unique<Region>(context_.get(), bytes);
}

std::unique_ptr<transport::Region> Transport::register_device_region(std::span<std::byte> bytes) {
  if (!cuda_memory_) {
    throw TransportError(fmt::format("ucx: rank {}: cannot register {} bytes of device memory: "
                                     "this UCX has no CUDA memory support (ucx_info -d)",
                                     rank_, bytes.size()));
  }
  return std::make_unique<Region>(context_.get(), bytes, UCS_MEMORY_TYPE_CUDA);
}

ucp_rkey_h Transport::remote_key_for(Peer& peer, std::span<const std::byte> packed) {
  auto key = std::make_pair(peer.rank, std::vector<std::byte>(packed.begin(), packed.end()));
  auto it = rkeys_.find(key);
  if (it != rkeys_.end()) return it->second.get();
  ucp_rkey_h rkey = nullptr;
  MURMUR_UCS_CHECK(ucp_ep_rkey_unpack(peer.ep, packed.data(), &rkey));
  return rkeys_.emplace(std::move(key), RemoteKey(rkey)).first->second.get();
}

}  // namespace murmur::transport::ucx
