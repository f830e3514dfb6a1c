// The progress loop of the libfabric backend: completions drive each Op through its steps (see
// transport.h: head, clear-to-send, body), errors become PeerLost/ProtocolError/TransportError
// on the Op, and peers that Liveness finds dead fail their pending requests.
#include "transport/ofi/protocol.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <rdma/fi_errno.h>

#include "core/error.h"
#include "transport/ofi/transport.h"

namespace murmur::transport::ofi {
namespace {


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

void Transport::progress() {
  fi_cq_tagged_entry entries[16];
  for (;;) {
    ssize_t n = fi_cq_read(cq_.get(), entries, 16);
    if (n == -FI_EAGAIN) break;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_.get(), &err, 0) == 1 && err.op_context != nullptr) {
        on_error(*static_cast<Context*>(err.op_context), err);
      }
      continue;
    }
    if (n < 0) MURMUR_FI_CHECK(n);
    for (ssize_t i = 0; i < n; ++i) {
      on_complete(*static_cast<Context*>(entries[i].op_context), entries[i].len);
    }
  }
  flush();
  check_liveness();
  restarts_.poll("ofi", rank_, [this](int r, std::vector<std::byte> blob) {
    revive(r, std::move(blob));
  });
}

void Transport::on_complete(Context& ctx, std::size_t length) {
  Op& op = *ctx.op;
  op.posted[ctx.index] = false;
  if (!op.error) {
    switch (op.step[ctx.index]) {
      case Step::kSmall:
      case Step::kPut:
        op.bytes = op.length;
        bytes_sent_ += op.length;
        break;
      case Step::kHead:
        if (op.kind == Kind::kRecv) on_head(op, length);
        break;
      case Step::kClear:
        if (op.kind == Kind::kSend) on_clear(op);
        break;
      case Step::kBody:
        if (op.kind == Kind::kRecv) {
          op.bytes = length;
          bytes_received_ += length;
        } else {
          op.bytes = op.length;
          bytes_sent_ += op.length;
        }
        break;
    }
  }
  settle(op);
}

void Transport::on_head(Op& op, std::size_t received) {
  Note head;
  std::byte* slot = op.slot[0].data;
  const bool inline_bytes = read_note(slot, received, kHeadMagic, &head) &&
                            (head.flags & kInlineFlag) != 0;
  if (!read_note(slot, received, kHeadMagic, &head) ||
      (inline_bytes ? received - kHeadBytes != head.length : received != kHeadBytes)) {
    abort(op, std::make_exception_ptr(ProtocolError(fmt::format(
                  "ofi: recv from rank {} tag {:#x}: malformed head of {} bytes", op.peer, op.tag,
                  received))));
    return;
  }
  if (head.length > op.capacity) {
    auto error = std::make_exception_ptr(ProtocolError(fmt::format(
        "ofi: recv from rank {} tag {:#x}: message of {} bytes is longer than the {} accepted "
        "(range or max_frame_bytes {})", op.peer, op.tag, head.length, op.capacity, max_frame_)));
    if (inline_bytes) {
      abort(op, error);
      return;
    }
    // The sender waits for an answer: refuse, and fail once the refusal is on its way.
    op.refused = error;
    write_note(slot, kClearMagic, 0, head.length);
    enqueue(op, 0, Step::kClear, Post::kSend, slot, kHeadBytes, op.slot[0].desc,
            wire_tag(rank_, Wire::kClear, op.tag));
    return;
  }
  if (inline_bytes) {
    if (head.length > 0) std::memcpy(op.user, slot + kHeadBytes, head.length);
    op.bytes = head.length;
    bytes_received_ += head.length;
    return;
  }
  // The body recv is posted before the clear-to-send leaves, so the body never arrives early.
  op.length = head.length;
  enqueue(op, 1, Step::kBody, Post::kRecv, op.user, head.length, op.user_desc,
          wire_tag(op.peer, Wire::kBody, op.tag));
  write_note(slot, kClearMagic, kAcceptFlag, head.length);
  enqueue(op, 0, Step::kClear, Post::kSend, slot, kHeadBytes, op.slot[0].desc,
          wire_tag(rank_, Wire::kClear, op.tag));
}

void Transport::on_clear(Op& op) {
  Note clear;
  if (!read_note(op.slot[0].data, kHeadBytes, kClearMagic, &clear) || clear.length != op.length) {
    abort(op, std::make_exception_ptr(ProtocolError(fmt::format(
                  "ofi: send to rank {} tag {:#x}: malformed clear-to-send", op.peer, op.tag))));
    return;
  }
  if ((clear.flags & kAcceptFlag) == 0) return;  // refused: the receiver reports it, we are done
  enqueue(op, 0, Step::kBody, Post::kSend, op.user, op.length, op.user_desc,
          wire_tag(rank_, Wire::kBody, op.tag));
}

void Transport::on_error(Context& ctx, const fi_cq_err_entry& err) {
  Op& op = *ctx.op;
  op.posted[ctx.index] = false;
  const char* what = kind_name(static_cast<int>(op.kind));
  const int code = std::abs(err.err);  // providers differ in the sign they report
  std::exception_ptr error;
  // A connection the provider found gone is the peer's death, as Liveness would report it a
  // moment later: every other request of that peer fails now too (`lost`). Otherwise a send of
  // ours whose head the provider keeps queued for the dead connection (it neither completes nor
  // fails it) is only given up by a silence and a cancel, while the live neighbors wait on us.
  std::string lost;
  if (op.cancelled) {
    error = std::make_exception_ptr(TransportError(
        fmt::format("ofi: {} rank {} tag {:#x}: cancelled", what, op.peer, op.tag)));
  } else if (code == FI_ECANCELED) {
    // Not by us: tcp;ofi_rxm cancels what is posted for a peer whose connection went down.
    lost = fmt::format(
        "ofi: {} rank {} tag {:#x}: cancelled by the provider (its connection is gone)", what,
        op.peer, op.tag);
    error = std::make_exception_ptr(PeerLost(lost));
  } else if (code == FI_ETRUNC || code == EMSGSIZE) {
    error = std::make_exception_ptr(ProtocolError(fmt::format(
        "ofi: {} rank {} tag {:#x}: truncated by the provider", what, op.peer, op.tag)));
  } else {
    const std::string detail = fi_cq_strerror(cq_.get(), err.prov_errno, err.err_data, nullptr, 0);
    const std::string message = fmt::format("ofi: {} rank {} tag {:#x}: {} ({})", what, op.peer,
                                            op.tag, fi_strerror(code), detail);
    if (is_connection_loss(code)) {
      lost = message;
      error = std::make_exception_ptr(PeerLost(message));
    } else {
      error = std::make_exception_ptr(TransportError(message));
    }
  }
  if (op.error) lost.clear();  // failed before (lose() or an earlier part): nothing new
  const int peer = op.peer;
  abort(op, error);
  settle(op);  // may release the Op: nothing of it after this
  if (!lost.empty()) lose(peer, lost);
}

void Transport::abort(Op& op, std::exception_ptr error) {
  if (!op.error) op.error = std::move(error);
  for (int i = 0; i < 2; ++i) {
    if (op.posted[i]) fi_cancel(&ep_->fid, &op.ctx[i].fi);
  }
  op.done.store(true, std::memory_order_release);
}

void Transport::settle(Op& op) {
  if (--op.remaining > 0) return;
  for (Slots::Slot& slot : op.slot) {
    if (slot) slots_->release(slot);
    slot = {};
  }
  if (!op.error && op.refused) op.error = op.refused;
  op.done.store(true, std::memory_order_release);
  inflight_.erase(&op);  // may drop the last reference: nothing after this
}

void Transport::check_liveness() {
  for (int r : liveness_.poll()) {
    lose(r, fmt::format("rank {} died (its process closed our liveness socket)", r));
  }
}

void Transport::lose(int r, const std::string& why) {
  if (lost_[r]) return;
  lost_[r] = true;
  for (auto& [ptr, op] : inflight_) {
    if (op->peer != r || op->done) continue;
    abort(*op, std::make_exception_ptr(PeerLost(fmt::format(
                   "ofi: {} rank {} tag {:#x}: {}", kind_name(static_cast<int>(op->kind)), r,
                   op->tag, why))));
  }
}

void Transport::drop(int peer) {
  if (peer < 0 || peer >= world_size_ || peer == rank_) return;
  if (lost_until_dropped_[peer]) {
    lost_until_dropped_[peer] = false;  // the old process given up: the new one may be talked to
    return;
  }
  dropped_[peer] = true;
  liveness_.drop(peer);
}

void Transport::revive(int r, std::vector<std::byte> blob) {
  if (r < 0 || r >= world_size_ || r == rank_) return;
  // The old process is gone, whether or not we had seen it go.
  lose(r, fmt::format("rank {} was restarted", r));
  liveness_.take_address(r, blob, "ofi");
  fi_addr_t addr = FI_ADDR_UNSPEC;
  const int inserted = fi_av_insert(av_.get(), blob.data(), 1, &addr, 0, nullptr);
  if (inserted != 1) {
    throw TransportError(fmt::format("ofi: fi_av_insert of restarted rank {}'s name failed ({})",
                                     r, inserted < 0 ? fi_strerror(-inserted) : "not inserted"));
  }
  // The old entry goes, and with it what the provider kept for the old process (rxm's
  // connection); a provider that cannot remove it keeps an entry nobody sends to.
  fi_addr_t old = addrs_[r];
  if (old != FI_ADDR_UNSPEC) (void)fi_av_remove(av_.get(), &old, 1, 0);  // UNSPEC: not met at start
  addrs_[r] = addr;
  lost_[r] = false;
  missed_[r].clear();
  lost_until_dropped_[r] = !dropped_[r];
  dropped_[r] = false;
  liveness_.renew(r);
  liveness_.watch(r);
  spdlog::info("ofi: rank {}: rank {} was restarted and met us again; its new endpoint is in "
               "the address vector", rank_, r);
}

}  // namespace murmur::transport::ofi
