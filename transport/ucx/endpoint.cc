// Data movement of the UCX backend: tagged send/recv, put + flush, and the progress loop that
// turns UCX completions (callbacks on the driving thread) into finished Requests.
#include "transport/ucx/transport.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "transport/ucx/region.h"

namespace murmur::transport::ucx {
namespace {

constexpr ucp_tag_t kFullMask = ~ucp_tag_t{0};

ucp_mem_h memh_of(const transport::Region& region) {
  auto* r = dynamic_cast<const Region*>(&region);
  return r != nullptr ? r->memh() : nullptr;
}

bool is_connection_loss(ucs_status_t s) {
  return s == UCS_ERR_CONNECTION_RESET || s == UCS_ERR_ENDPOINT_TIMEOUT ||
         s == UCS_ERR_UNREACHABLE || s == UCS_ERR_REJECTED || s == UCS_ERR_TIMED_OUT ||
         s == UCS_ERR_IO_ERROR;
}

const char* kind_name(int kind) {
  static const char* names[] = {"send", "recv", "put"};
  return names[kind];
}

}  // namespace

ucp_tag_t Transport::wire_tag(int source, Tag tag) const {
  if (tag > max_tag_) {
    throw TransportError(fmt::format("ucx: tag {:#x} exceeds the {:#x} a world of {} can carry", tag,
                                     max_tag_, world_size_));
  }
  return (static_cast<ucp_tag_t>(source) << rank_shift_) | tag;
}

void Transport::check_range(const transport::Region& region, ByteRange range,
                            const char* what) const {
  if (range.offset > region.bytes().size() || range.size > region.bytes().size() - range.offset) {
    throw TransportError(fmt::format("ucx: {}: range [{}, +{}) is outside a region of {} bytes",
                                     what, range.offset, range.size, region.bytes().size()));
  }
}

Request Transport::send(int peer, Tag tag, const transport::Region& from, ByteRange range) {
  Peer& p = peer_for(peer, "send");
  check_range(from, range, "send");
  if (range.size > max_frame_) {
    throw ProtocolError(fmt::format("ucx: send to rank {}: {} bytes exceed max_frame_bytes {}",
                                    peer, range.size, max_frame_));
  }
  auto op = std::make_shared<Op>();
  op->kind = Kind::kSend;
  op->peer = peer;
  op->tag = tag;
  op->bytes = range.size;
  // A rank lost before: the request fails at its first test(), with the loss, as any other.
  if (std::exception_ptr loss = loss_for(p)) return failed(std::move(op), loss);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &Transport::on_send;
  param.user_data = op.get();
  if (ucp_mem_h memh = memh_of(from)) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    param.memh = memh;
  }
  ucs_status_ptr_t req = ucp_tag_send_nbx(p.ep, from.bytes().data() + range.offset, range.size,
                                          wire_tag(rank_, tag), &param);
  return track(std::move(op), req, 0);
}

Request Transport::recv(int peer, Tag tag, transport::Region& into, ByteRange range) {
  Peer& p = peer_for(peer, "recv");
  check_range(into, range, "recv");
  auto op = std::make_shared<Op>();
  op->kind = Kind::kRecv;
  op->peer = peer;
  op->tag = tag;
  if (std::exception_ptr loss = loss_for(p)) return failed(std::move(op), loss);
  // Posting at most max_frame bytes makes UCX refuse a longer message (truncation) before it
  // lands anywhere but this buffer.
  op->capacity = std::min(range.size, max_frame_);
  ucp_request_param_t param{};
  // No immediate completion: UCX 1.13 leaves RECV_INFO's length at 0 when a message already
  // waiting completes the recv in place, so the callback is the one place lengths come from.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = &Transport::on_recv;
  param.user_data = op.get();
  if (ucp_mem_h memh = memh_of(into)) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    param.memh = memh;
  }
  ucs_status_ptr_t req = ucp_tag_recv_nbx(worker_.get(), into.bytes().data() + range.offset,
                                          op->capacity, wire_tag(peer, tag), kFullMask, &param);
  return track(std::move(op), req, 0);
}

Request Transport::put(int peer, const transport::Region& from, ByteRange range,
                       std::span<const std::byte> remote_key, std::size_t remote_offset) {
  Peer& p = peer_for(peer, "put");
  check_range(from, range, "put");
  RemoteKeyView key = parse_remote_key(remote_key);
  if (remote_offset > key.size || range.size > key.size - remote_offset) {
    throw TransportError(fmt::format("ucx: put to rank {}: [{}, +{}) is outside its region of {} bytes",
                                     peer, remote_offset, range.size, key.size));
  }
  auto op = std::make_shared<Op>();
  op->kind = Kind::kPut;
  op->peer = peer;
  op->bytes = range.size;
  if (std::exception_ptr loss = loss_for(p)) return failed(std::move(op), loss);
  ucp_rkey_h rkey = remote_key_for(p, key.packed);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &Transport::on_send;
  param.user_data = op.get();
  ucp_request_param_t put_param = param;
  if (ucp_mem_h memh = memh_of(from)) {
    put_param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    put_param.memh = memh;
  }
  ucs_status_ptr_t put_req = ucp_put_nbx(p.ep, from.bytes().data() + range.offset, range.size,
                                         key.address + remote_offset, rkey, &put_param);
  if (UCS_PTR_IS_ERR(put_req)) return track(std::move(op), put_req, 0);
  if (put_req != nullptr) {
    op->ucp[0] = put_req;
    ++op->outstanding;
  }
  // Completion of the put alone only frees the local buffer; the flush makes it remote-visible.
  ucs_status_ptr_t flush_req = ucp_ep_flush_nbx(p.ep, &param);
  return track(std::move(op), flush_req, 1);
}

Request Transport::track(std::shared_ptr<Op> op, ucs_status_ptr_t result, int slot) {
  op->owner = this;
  if (UCS_PTR_IS_ERR(result)) {
    op->status = UCS_PTR_STATUS(result);
  } else if (result != nullptr) {
    op->ucp[slot] = result;
    ++op->outstanding;
  }
  if (op->outstanding == 0) {
    finish(*op);
  } else {
    inflight_.emplace(op.get(), op);
  }
  return Request(std::move(op));
}

void Transport::on_send(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  if (status != UCS_OK && op->status == UCS_OK) op->status = status;
  if (--op->outstanding == 0) op->owner->completed_.push_back(op);
}

void Transport::on_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                        void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  if (status != UCS_OK && op->status == UCS_OK) op->status = status;
  if (status == UCS_OK && info != nullptr) op->bytes = info->length;
  if (--op->outstanding == 0) op->owner->completed_.push_back(op);
}

void Transport::finish(Op& op) {
  for (void*& req : op.ucp) {
    if (req != nullptr) ucp_request_free(req);
    req = nullptr;
  }
  if (op.done.load(std::memory_order_acquire)) return;  // an abandoned send: failed already
  const char* what = kind_name(static_cast<int>(op.kind));
  const ucs_status_t s = op.status;
  Peer* peer = (op.peer >= 0 && op.peer < world_size_) ? peers_[op.peer].get() : nullptr;
  if (s == UCS_OK) {
    (op.kind == Kind::kRecv ? bytes_received_ : bytes_sent_) += op.bytes;
  } else if (op.cancelled) {
    op.error = std::make_exception_ptr(TransportError(
        fmt::format("ucx: {} rank {} tag {:#x}: cancelled", what, op.peer, op.tag)));
  } else if (peer != nullptr && peer->lost) {
    op.error = peer->lost;
  } else if (s == UCS_ERR_MESSAGE_TRUNCATED) {
    op.error = std::make_exception_ptr(ProtocolError(fmt::format(
        "ucx: recv from rank {} tag {:#x}: message longer than the {} bytes accepted "
        "(range or max_frame_bytes {})", op.peer, op.tag, op.capacity, max_frame_)));
  } else if (is_connection_loss(s) || s == UCS_ERR_CANCELED) {
    op.error = std::make_exception_ptr(PeerLost(fmt::format(
        "ucx: {} rank {} tag {:#x}: peer lost: {}", what, op.peer, op.tag, ucs_status_string(s))));
  } else {
    op.error = std::make_exception_ptr(TransportError(fmt::format(
        "ucx: {} rank {} tag {:#x}: {}", what, op.peer, op.tag, ucs_status_string(s))));
  }
  op.done.store(true, std::memory_order_release);
}

void Transport::progress() {
  while (ucp_worker_progress(worker_.get()) != 0) {
  }
  check_liveness();
  sweep();
  if (!closed_) restarts_.poll("ucx", rank_, [this](int r, std::vector<std::byte> blob) {
    revive(r, std::move(blob));
  });
}

std::exception_ptr Transport::loss_for(Peer& p) {
  if (p.lost) return p.lost;
  return p.lost_until_dropped;
}

Request Transport::failed(std::shared_ptr<Op> op, std::exception_ptr error) {
  // A rank lost before: the request fails at its first test(), with the loss, as any other.
  op->owner = this;
  op->error = std::move(error);
  op->done.store(true, std::memory_order_release);
  return Request(std::move(op));
}

void Transport::drop(int peer) {
  Peer* p = (peer >= 0 && peer < world_size_) ? peers_[peer].get() : nullptr;
  if (p != nullptr && p->lost_until_dropped) {
    p->lost_until_dropped = nullptr;  // the old process given up: the new one may be talked to
    return;
  }
  if (p != nullptr) p->dropped = true;
  liveness_.drop(peer);
}

void Transport::revive(int r, std::vector<std::byte> blob) {
  if (r < 0 || r >= world_size_ || !peers_[r]) return;
  Peer* old = peers_[r].get();
  // The old process is gone, whether or not we had seen it go: what was pending with it fails
  // (sweep), and its endpoint is closed.
  if (old->failure == UCS_OK) {
    old->failure = UCS_ERR_CONNECTION_RESET;
    old->restarted = true;
    failed_.push_back(old);
  }
  sweep();
  if (old->ep != nullptr) {
    // Mode NONE (never closed by force): a plain close, which UCX finishes on its own.
    ucp_request_param_t param{};
    ucs_status_ptr_t req = ucp_ep_close_nbx(old->ep, &param);
    if (req != nullptr && !UCS_PTR_IS_ERR(req)) ucp_request_free(req);
    old->ep = nullptr;
  }
  liveness_.take_address(r, blob, "ucx");
  std::exception_ptr loss = old->dropped ? nullptr : old->lost;
  retired_.push_back(std::move(peers_[r]));
  peers_[r] = make_peer(r, blob);
  peers_[r]->lost_until_dropped = loss;
  liveness_.renew(r);
  liveness_.watch(r);
  spdlog::info("ucx: rank {}: rank {} was restarted and met us again; connected to its new "
               "process", rank_, r);
}

void Transport::check_liveness() {
  for (int r : liveness_.poll()) {
    Peer* peer = peers_[r].get();
    if (peer == nullptr || peer->failure != UCS_OK) continue;
    // The same path as err_cb: the loss is built on this thread in sweep().
    peer->failure = UCS_ERR_CONNECTION_RESET;
    peer->by_liveness = true;
    failed_.push_back(peer);
  }
}

void Transport::sweep() {
  // A failed endpoint: its sends fail inside UCX, but receives wait on the worker, so cancel
  // the ones from that rank; then close the endpoint by force (err_cb may not close it).
  while (!failed_.empty()) {
    Peer* peer = failed_.back();
    failed_.pop_back();
    peer->lost = std::make_exception_ptr(PeerLost(
        peer->restarted      ? fmt::format("ucx: rank {} lost: it was restarted", peer->rank)
        : peer->by_liveness ? fmt::format("ucx: rank {} lost: its process closed our liveness socket", peer->rank)
                            : fmt::format("ucx: rank {} lost: {}", peer->rank, ucs_status_string(peer->failure))));
    for (auto& [op, state] : inflight_) {
      if (op->peer != peer->rank) continue;
      if (op->kind == Kind::kRecv && op->ucp[0] != nullptr) {
        ucp_request_cancel(worker_.get(), op->ucp[0]);
      } else if (op->kind != Kind::kRecv && !op->done && !peer->handles_errors) {
        // No forced close will complete it (error mode NONE): fail it now, and leave the
        // request with UCX, as cancel() does.
        op->error = peer->lost;
        op->done.store(true, std::memory_order_release);
      }
    }
    std::erase_if(rkeys_, [&](const auto& entry) { return entry.first.first == peer->rank; });
    // Closing by force is for endpoints in error mode PEER only (UCX's rule): in mode NONE the
    // endpoint stays until close(), and only new and pending operations fail.
    if (peer->ep != nullptr && peer->handles_errors) {
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t req = ucp_ep_close_nbx(peer->ep, &param);
      if (req != nullptr && !UCS_PTR_IS_ERR(req)) ucp_request_free(req);
      peer->ep = nullptr;
    }
    while (ucp_worker_progress(worker_.get()) != 0) {
    }
    if (!peer->handles_errors) {
      // A receive UCX had already matched (a rendezvous under way over shared memory) ignores
      // the cancel, and in mode NONE nothing else ends it: fail it now too. Its sender is dead,
      // so no more of its bytes can come; UCX lets go of the request at close().
      for (auto& [op, state] : inflight_) {
        if (op->peer != peer->rank || op->kind != Kind::kRecv || op->done) continue;
        if (std::find(completed_.begin(), completed_.end(), op) != completed_.end()) continue;
        op->error = peer->lost;
        op->done.store(true, std::memory_order_release);
      }
    }
  }
  for (Op* op : completed_) {
    finish(*op);
    inflight_.erase(op);  // may drop the last reference: finish first
  }
  completed_.clear();
}

bool Transport::test(Request& request) {
  auto* op = static_cast<Op*>(request.state());
  if (op == nullptr) throw TransportError("ucx: test on an empty Request");
  if (!op->done.load(std::memory_order_acquire) && worker_) progress();
  if (!op->done.load(std::memory_order_acquire)) return false;
  if (op->error) std::rethrow_exception(op->error);
  return true;
}

void Transport::cancel(Request& request) {
  auto* op = static_cast<Op*>(request.state());
  if (op == nullptr || op->done) return;
  op->cancelled = true;
  if (op->kind == Kind::kRecv) {
    ucp_request_cancel(worker_.get(), op->ucp[0]);
    const Deadline deadline = deadline_after(std::chrono::milliseconds(connect_timeout_ms_));
    while (!op->done && Clock::now() < deadline) progress();
    return;
  }
  // UCX cannot withdraw a send or put that has started, and closing the endpoint by force (the
  // only way to make it let go) looks to the peer like our death: a live neighbor that merely
  // never posted the matching receive (a ring it left for the agreement) would lose us, and its
  // neighbors it, in a cascade. So the request is abandoned instead: it fails now for the
  // caller, and stays with UCX (and in inflight_) until the peer matches it, fails, or close().
  // Our tags are never reused within a run, so no later receive matches an abandoned send.
  op->error = std::make_exception_ptr(TransportError(
      fmt::format("ucx: {} rank {} tag {:#x}: cancelled", kind_name(static_cast<int>(op->kind)),
                  op->peer, op->tag)));
  op->done.store(true, std::memory_order_release);
}

}  // namespace murmur::transport::ucx
