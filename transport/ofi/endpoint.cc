// Data movement of the libfabric backend: tagged send/recv, RMA write, and the CQ loop that
// turns completions (and error completions) into finished Requests.
#include "transport/ofi/transport.h"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "core/error.h"
#include "transport/ofi/region.h"

namespace murmur::transport::ofi {
namespace {

void* desc_of(const transport::Region& region) {
  auto* r = dynamic_cast<const Region*>(&region);
  return r != nullptr ? r->desc() : nullptr;
}

bool is_connection_loss(int err) {
  return err == FI_ECONNRESET || err == FI_ECONNREFUSED || err == FI_ENOTCONN ||
         err == FI_ECONNABORTED || err == FI_EHOSTUNREACH || err == FI_ETIMEDOUT ||
         err == FI_EIO || err == EPIPE || err == FI_ESHUTDOWN;
}

const char* kind_name(int kind) {
  static const char* names[] = {"send", "recv", "put"};
  return names[kind];
}

}  // namespace

std::uint64_t Transport::wire_tag(int source, Tag tag) const {
  if (tag > max_tag_) {
    throw TransportError(fmt::format("ofi: tag {:#x} exceeds the {:#x} a world of {} can carry",
                                     tag, max_tag_, world_size_));
  }
  return (static_cast<std::uint64_t>(source) << rank_shift_) | tag;
}

void Transport::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= world_size_ || peer == rank_) {
    throw TransportError(fmt::format("ofi: {}: rank {} is not a peer of rank {} in a world of {}",
                                     what, peer, rank_, world_size_));
  }
}

void Transport::check_range(const transport::Region& region, ByteRange range,
                            const char* what) const {
  if (range.offset > region.bytes().size() || range.size > region.bytes().size() - range.offset) {
    throw TransportError(fmt::format("ofi: {}: range [{}, +{}) is outside a region of {} bytes",
                                     what, range.offset, range.size, region.bytes().size()));
  }
  if (range.size > max_msg_size_) {
    throw TransportError(fmt::format("ofi: {}: {} bytes exceed the provider's max_msg_size {}",
                                     what, range.size, max_msg_size_));
  }
}

template <class Post>
Request Transport::start(std::shared_ptr<Op> op, const char* call, Post post) {
  op->context.op = op.get();
  const Deadline deadline = deadline_after(std::chrono::milliseconds(connect_timeout_ms_));
  for (;;) {
    ssize_t ret = post(&op->context.fi);
    if (ret == 0) break;
    if (ret != -FI_EAGAIN) {
      throw TransportError(fmt::format("ofi: {} rank {} tag {:#x}: {}", call, op->peer, op->tag,
                                       fi_strerror(static_cast<int>(-ret))));
    }
    // The provider's queues are full: completions free them.
    progress();
    if (Clock::now() >= deadline) {
      throw PeerLost(fmt::format("ofi: {} rank {}: queue stayed full for {} ms", call, op->peer,
                                 connect_timeout_ms_));
    }
  }
  inflight_.emplace(op.get(), op);
  return Request(std::move(op));
}

Request Transport::send(int peer, Tag tag, const transport::Region& from, ByteRange range) {
  check_peer(peer, "send");
  check_range(from, range, "send");
  if (range.size > max_frame_) {
    throw ProtocolError(fmt::format("ofi: send to rank {}: {} bytes exceed max_frame_bytes {}",
                                    peer, range.size, max_frame_));
  }
  auto op = std::make_shared<Op>();
  op->kind = Kind::kSend;
  op->peer = peer;
  op->tag = tag;
  op->bytes = range.size;
  const std::uint64_t wire = wire_tag(rank_, tag);
  void* buf = from.bytes().data() + range.offset;
  void* desc = desc_of(from);
  return start(std::move(op), "fi_tsend", [&](fi_context2* ctx) {
    return fi_tsend(ep_.get(), buf, range.size, desc, addrs_[peer], wire, ctx);
  });
}

Request Transport::recv(int peer, Tag tag, transport::Region& into, ByteRange range) {
  check_peer(peer, "recv");
  check_range(into, range, "recv");
  auto op = std::make_shared<Op>();
  op->kind = Kind::kRecv;
  op->peer = peer;
  op->tag = tag;
  // A buffer of at most max_frame bytes makes a longer message a truncation (FI_ETRUNC).
  const std::size_t capacity = std::min(range.size, max_frame_);
  op->capacity = capacity;
  const std::uint64_t wire = wire_tag(peer, tag);
  void* buf = into.bytes().data() + range.offset;
  void* desc = desc_of(into);
  return start(std::move(op), "fi_trecv", [&](fi_context2* ctx) {
    return fi_trecv(ep_.get(), buf, capacity, desc, FI_ADDR_UNSPEC, wire, 0, ctx);
  });
}

Request Transport::put(int peer, const transport::Region& from, ByteRange range,
                       std::span<const std::byte> remote_key, std::size_t remote_offset) {
  if (!has_rma_) return transport::Transport::put(peer, from, range, remote_key, remote_offset);
  check_peer(peer, "put");
  check_range(from, range, "put");
  RemoteKeyView key = parse_remote_key(remote_key);
  if (remote_offset > key.size || range.size > key.size - remote_offset) {
    throw TransportError(fmt::format(
        "ofi: put to rank {}: [{}, +{}) is outside its region of {} bytes", peer, remote_offset,
        range.size, key.size));
  }
  auto op = std::make_shared<Op>();
  op->kind = Kind::kPut;
  op->peer = peer;
  op->bytes = range.size;
  iovec iov{from.bytes().data() + range.offset, range.size};
  void* desc = desc_of(from);
  fi_rma_iov rma{key.address + remote_offset, range.size, key.key};
  return start(std::move(op), "fi_writemsg", [&](fi_context2* ctx) {
    fi_msg_rma msg{};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = addrs_[peer];
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.context = ctx;
    // Delivery-complete: when the request finishes, the bytes are in the peer's memory.
    return fi_writemsg(ep_.get(), &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
  });
}

void Transport::progress() {
  fi_cq_tagged_entry entries[16];
  for (;;) {
    ssize_t n = fi_cq_read(cq_.get(), entries, 16);
    if (n == -FI_EAGAIN) return;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_.get(), &err, 0) == 1 && err.op_context != nullptr) {
        fail(*static_cast<Context*>(err.op_context)->op, err);
      }
      continue;
    }
    if (n < 0) MURMUR_FI_CHECK(n);
    for (ssize_t i = 0; i < n; ++i) {
      complete(*static_cast<Context*>(entries[i].op_context)->op, entries[i].len);
    }
  }
}

void Transport::complete(Op& op, std::size_t length) {
  if (op.kind == Kind::kRecv) {
    op.bytes = length;
    bytes_received_ += length;
  } else {
    bytes_sent_ += op.bytes;
  }
  op.done.store(true, std::memory_order_release);
  inflight_.erase(&op);  // may drop the last reference: nothing after this
}

void Transport::fail(Op& op, const fi_cq_err_entry& err) {
  const char* what = kind_name(static_cast<int>(op.kind));
  const int code = std::abs(err.err);  // providers differ in the sign they report
  if (op.cancelled || code == FI_ECANCELED) {
    op.error = std::make_exception_ptr(TransportError(
        fmt::format("ofi: {} rank {} tag {:#x}: cancelled", what, op.peer, op.tag)));
  } else if (code == FI_ETRUNC || code == EMSGSIZE) {
    op.error = std::make_exception_ptr(ProtocolError(fmt::format(
        "ofi: recv from rank {} tag {:#x}: message longer than the {} bytes accepted "
        "(range or max_frame_bytes {})", op.peer, op.tag, op.capacity, max_frame_)));
  } else {
    const std::string detail = fi_cq_strerror(cq_.get(), err.prov_errno, err.err_data, nullptr, 0);
    const std::string message = fmt::format("ofi: {} rank {} tag {:#x}: {} ({})", what, op.peer,
                                            op.tag, fi_strerror(code), detail);
    op.error = is_connection_loss(code) ? std::make_exception_ptr(PeerLost(message))
                                           : std::make_exception_ptr(TransportError(message));
  }
  op.done.store(true, std::memory_order_release);
  inflight_.erase(&op);
}

bool Transport::test(Request& request) {
  auto* op = static_cast<Op*>(request.state());
  if (op == nullptr) throw TransportError("ofi: test on an empty Request");
  if (!op->done.load(std::memory_order_acquire)) progress();
  if (!op->done.load(std::memory_order_acquire)) return false;
  if (op->error) std::rethrow_exception(op->error);
  return true;
}

void Transport::cancel(Request& request) {
  auto* op = static_cast<Op*>(request.state());
  if (op == nullptr || op->done) return;
  op->cancelled = true;
  fi_cancel(&ep_->fid, &op->context.fi);
  const Deadline deadline = deadline_after(std::chrono::milliseconds(connect_timeout_ms_));
  while (!op->done && Clock::now() < deadline) progress();
}

}  // namespace murmur::transport::ofi
