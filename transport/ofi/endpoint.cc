// Starting operations of the libfabric backend: send, recv and put become Ops whose provider
// operations are queued in posting order and posted by flush(); test, wait and cancel.
#include <algorithm>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "core/error.h"
#include "transport/ofi/protocol.h"
#include "transport/ofi/region.h"
#include "transport/ofi/transport.h"

namespace murmur::transport::ofi {
namespace {

void* desc_of(const transport::Region& region) {
  auto* r = dynamic_cast<const Region*>(&region);
  return r != nullptr ? r->desc() : nullptr;
}

}  // namespace

std::uint64_t Transport::wire_tag(int source, Wire kind, Tag tag) const {
  if (tag > max_tag_) {
    throw TransportError(fmt::format("ofi: tag {:#x} exceeds the {:#x} a world of {} can carry",
                                     tag, max_tag_, world_size_));
  }
  return (static_cast<std::uint64_t>(source) << rank_shift_) |
         (static_cast<std::uint64_t>(kind) << kind_shift_) | tag;
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

std::shared_ptr<Transport::Op> Transport::make_op(Kind kind, int peer, Tag tag) {
  auto op = std::make_shared<Op>();
  op->kind = kind;
  op->peer = peer;
  op->tag = tag;
  for (int i = 0; i < 2; ++i) {
    op->ctx[i].op = op.get();
    op->ctx[i].index = i;
  }
  return op;
}

void Transport::enqueue(Op& op, int index, Step step, decltype(Post::kSend) call, void* buf,
                        std::size_t len, void* desc, std::uint64_t wire) {
  ++op.remaining;
  posts_.push_back(Post{&op, index, step, call, buf, len, desc, wire});
}

Request Transport::begin(std::shared_ptr<Op> op) {
  liveness_.watch(op->peer);
  if (lost_[op->peer] || lost_until_dropped_[op->peer]) {
    // Found dead before: fail at the first test() without posting anything.
    posts_.erase(std::remove_if(posts_.begin(), posts_.end(),
                                [&](const Post& p) { return p.op == op.get(); }),
                 posts_.end());
    op->remaining = 0;
    for (Slots::Slot& slot : op->slot) {
      if (slot) slots_->release(slot);
    }
    const std::string& missed = missed_[op->peer];
    op->error = std::make_exception_ptr(PeerLost(
        missed.empty()
            ? fmt::format("ofi: rank {} tag {:#x}: rank {} died earlier", op->peer, op->tag, op->peer)
            : fmt::format("ofi: rank {} tag {:#x}: not met at start: {}", op->peer, op->tag,
                          missed)));
    op->done.store(true, std::memory_order_release);
    return Request(std::move(op));
  }
  inflight_.emplace(op.get(), op);
  Request request(std::move(op));
  flush();
  return request;
}

Request Transport::send(int peer, Tag tag, const transport::Region& from, ByteRange range) {
  check_peer(peer, "send");
  check_range(from, range, "send");
  if (range.size > max_frame_) {
    throw ProtocolError(fmt::format("ofi: send to rank {}: {} bytes exceed max_frame_bytes {}",
                                    peer, range.size, max_frame_));
  }
  const std::uint64_t head = wire_tag(rank_, Wire::kHead, tag);
  auto op = make_op(Kind::kSend, peer, tag);
  op->user = from.bytes().data() + range.offset;
  op->user_desc = desc_of(from);
  op->length = range.size;
  op->slot[0] = slots_->acquire();
  if (range.size <= kInline) {
    // One message: the head carries the bytes (one copy of at most kInline bytes).
    write_head(op->slot[0].data, range.size);
    if (range.size > 0) std::memcpy(op->slot[0].data + kHeadBytes, op->user, range.size);
    enqueue(*op, 0, Step::kSmall, Post::kSend, op->slot[0].data, kHeadBytes + range.size,
            op->slot[0].desc, head);
  } else {
    // The clear-to-send recv goes first, so that the answer always finds it posted.
    op->slot[1] = slots_->acquire();
    write_head(op->slot[1].data, range.size);
    enqueue(*op, 0, Step::kClear, Post::kRecv, op->slot[0].data, Slots::kSize, op->slot[0].desc,
            wire_tag(peer, Wire::kClear, tag));
    enqueue(*op, 1, Step::kHead, Post::kSend, op->slot[1].data, kHeadBytes, op->slot[1].desc,
            head);
  }
  return begin(std::move(op));
}

Request Transport::recv(int peer, Tag tag, transport::Region& into, ByteRange range) {
  check_peer(peer, "recv");
  check_range(into, range, "recv");
  const std::uint64_t head = wire_tag(peer, Wire::kHead, tag);
  auto op = make_op(Kind::kRecv, peer, tag);
  op->user = into.bytes().data() + range.offset;
  op->user_desc = desc_of(into);
  op->capacity = std::min(range.size, max_frame_);
  op->slot[0] = slots_->acquire();
  enqueue(*op, 0, Step::kHead, Post::kRecv, op->slot[0].data, Slots::kSize, op->slot[0].desc,
          head);
  return begin(std::move(op));
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
  auto op = make_op(Kind::kPut, peer, 0);
  op->length = range.size;
  op->rma = fi_rma_iov{key.address + remote_offset, range.size, key.key};
  enqueue(*op, 0, Step::kPut, Post::kWrite, from.bytes().data() + range.offset, range.size,
          desc_of(from), 0);
  return begin(std::move(op));
}

ssize_t Transport::post(Post& p) {
  Op& op = *p.op;
  op.step[p.index] = p.step;
  fi_context2* ctx = &op.ctx[p.index].fi;
  switch (p.call) {
    case Post::kSend:
      return fi_tsend(ep_.get(), p.buf, p.len, p.desc, addrs_[op.peer], p.wire, ctx);
    case Post::kRecv:
      return fi_trecv(ep_.get(), p.buf, p.len, p.desc, FI_ADDR_UNSPEC, p.wire, 0, ctx);
    case Post::kWrite: {
      iovec iov{p.buf, p.len};
      void* desc = p.desc;
      fi_msg_rma msg{};
      msg.msg_iov = &iov;
      msg.desc = &desc;
      msg.iov_count = 1;
      msg.addr = addrs_[op.peer];
      msg.rma_iov = &op.rma;
      msg.rma_iov_count = 1;
      msg.context = ctx;
      // Delivery-complete: when the request finishes, the bytes are in the peer's memory.
      return fi_writemsg(ep_.get(), &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
    }
  }
  return -FI_EINVAL;
}

void Transport::flush() {
  // In order, stopping at the first post the provider cannot take yet: two messages under one
  // tag must reach the provider in the order they were asked for.
  while (!posts_.empty()) {
    // Copied out: the Post is gone after pop_front() (reading its index after the pop was a
    // use-after-free that AddressSanitizer found).
    Op& op = *posts_.front().op;
    const int index = posts_.front().index;
    if (op.error) {  // failed or cancelled meanwhile: this part is never posted
      posts_.pop_front();
      settle(op);
      continue;
    }
    ssize_t ret = post(posts_.front());
    if (ret == -FI_EAGAIN) return;
    posts_.pop_front();
    if (ret != 0) {
      abort(op, std::make_exception_ptr(TransportError(
                    fmt::format("ofi: posting to rank {} tag {:#x}: {}", op.peer, op.tag,
                                fi_strerror(static_cast<int>(-ret))))));
      settle(op);
      continue;
    }
    op.posted[index] = true;
  }
}

bool Transport::test(Request& request) {
  auto* op = static_cast<Op*>(request.state());
  if (op == nullptr) throw TransportError("ofi: test on an empty Request");
  if (!op->done.load(std::memory_order_acquire)) progress();
  if (!op->done.load(std::memory_order_acquire)) return false;
  if (op->error) std::rethrow_exception(op->error);
  return true;
}

bool Transport::wait(Request& request, Deadline deadline) {
  for (int idle = 0;; ++idle) {
    if (test(request)) return true;
    if (Clock::now() >= deadline) return false;
    if (idle >= 16) std::this_thread::yield();
  }
}

void Transport::cancel(Request& request) {
  auto* op = static_cast<Op*>(request.state());
  if (op == nullptr || op->done) return;
  op->cancelled = true;
  abort(*op, std::make_exception_ptr(TransportError(
                 fmt::format("ofi: rank {} tag {:#x}: cancelled", op->peer, op->tag))));
  // Give the provider a moment to let go of the caller's memory (a body under way may not
  // cancel). Only the body and a put touch it: a head or clear-to-send lives in a slot of ours,
  // kept until its completion, so one the provider holds on to (queued for a connection that
  // is gone) is left to it rather than waited for.
  const Deadline deadline = deadline_after(std::chrono::milliseconds(connect_timeout_ms_));
  auto held = request.shared();
  const auto& o = *static_cast<Op*>(held.get());
  auto in_user_memory = [&] {
    for (int i = 0; i < 2; ++i) {
      if (o.posted[i] && (o.step[i] == Step::kBody || o.step[i] == Step::kPut)) return true;
    }
    return false;
  };
  while (in_user_memory() && Clock::now() < deadline) progress();
}

}  // namespace murmur::transport::ofi
