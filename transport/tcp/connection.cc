// The data path of the tcp backend: one reader and at most one writer coroutine per connection,
// and a watchdog for stalled transfers and connections that never come.
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "transport/tcp/context.h"

namespace murmur::transport::tcp {

// Spawned with p.writing already set, so that two sends in a row never start two writers.
asio::awaitable<void> Context::write_loop(Peer& p) {
  auto socket = p.socket;  // keeps the socket alive across a failure that resets p.socket
  const std::uint64_t generation = p.generation;  // reset() may give p a new connection
  const std::size_t chunk = static_cast<std::size_t>(config_.chunk_bytes);
  while (!p.sends.empty() && !p.error) {
    std::shared_ptr<SendOp> op = p.sends.front();
    std::size_t offset = 0;
    bool aborted = false;  // cancelled mid-message: an abort frame went instead of the rest
    p.last_progress = Clock::now();  // the stall clock starts with this message
    try {
      if (op->heartbeat) {
        FrameHeader h{FrameKind::kHeartbeat, 0, 0, 0, 0, 0};
        h.crc = header_crc(h);
        FrameBytes header = encode(h);
        co_await asio::async_write(*socket, asio::buffer(header), asio::use_awaitable);
        if (p.generation != generation) co_return;
        p.last_progress = p.last_sent = Clock::now();
      } else {
        do {
          std::size_t length = std::min(chunk, op->size - offset);
          FrameHeader h{FrameKind::kData, op->tag, length, offset, op->size, 0};
          h.crc = payload_crc(header_crc(h), {op->data + offset, length});
          FrameBytes header = encode(h);
          // Scatter-gather: the header and the caller's bytes go out in one write, uncopied.
          std::array<asio::const_buffer, 2> buffers{asio::buffer(header),
                                                    asio::buffer(op->data + offset, length)};
          co_await asio::async_write(*socket, buffers, TransferAll{}, asio::use_awaitable);
          if (p.generation != generation) co_return;  // reset() failed our ops already
          p.last_progress = p.last_sent = Clock::now();
          sent_ += length;
          offset += length;
          if (op->abandoned && offset < op->size) {
            FrameHeader a{FrameKind::kAbort, op->tag, 0, offset, op->size, 0};
            a.crc = header_crc(a);
            FrameBytes abort = encode(a);
            co_await asio::async_write(*socket, asio::buffer(abort), asio::use_awaitable);
            if (p.generation != generation) co_return;
            p.last_progress = p.last_sent = Clock::now();
            aborted = true;
            break;
          }
        } while (offset < op->size);
      }
    } catch (const boost::system::system_error& e) {
      // Closing: the socket was half-closed under a heartbeat; leave it to the linger.
      if (p.generation != generation || closing_) co_return;
      if (!p.error) {
        fail(p, std::make_exception_ptr(PeerLost(fmt::format(
                    "{}: lost {} while sending {} bytes (tag {}): {}", self(), p.describe(),
                    op->size, op->tag, e.code().message()))));
      }
      if (!p.sends.empty()) p.sends.pop_front();
      complete(*op, p.error);
      break;
    }
    p.sends.pop_front();
    complete(*op, aborted ? cancelled_error() : nullptr);
  }
  p.writing = false;
  if (p.error) {
    for (auto& op : p.sends) complete(*op, p.error);
    p.sends.clear();
  }
}

std::byte* Context::place(Peer& p, const FrameHeader& h) {
  auto& in = p.incoming;
  if (h.offset == 0) {
    if (in.active) {
      throw ProtocolError(fmt::format("{}: frame from {}: new message (tag {}) before the last "
                                      "one (tag {}) ended", self(), p.describe(), h.tag, in.tag));
    }
    in = {};
    in.active = true;
    in.tag = h.tag;
    in.total = h.total;
    auto posted = p.recvs.find(h.tag);
    if (posted != p.recvs.end() && !posted->second.empty()) {
      auto op = posted->second.front();
      posted->second.pop_front();
      if (posted->second.empty()) p.recvs.erase(posted);
      if (h.total > op->capacity) {
        complete(*op, std::make_exception_ptr(ProtocolError(fmt::format(
                          "{}: message of {} bytes from {} (tag {}) exceeds the recv range of {}",
                          self(), h.total, p.describe(), h.tag, op->capacity))));
      } else {
        in.recv = std::move(op);
      }
    } else {
      p.unexpected.push_back(std::make_unique<Unexpected>());
      in.unexpected = p.unexpected.back().get();
      in.unexpected->tag = h.tag;
      in.unexpected->total = h.total;
    }
  } else if (!in.active || in.tag != h.tag || in.received != h.offset || in.total != h.total) {
    throw ProtocolError(fmt::format("{}: frame from {}: tag {} offset {} does not continue the "
                                    "message being received", self(), p.describe(), h.tag, h.offset));
  }
  if (in.recv) return in.recv->data + h.offset;
  if (in.unexpected) {
    // Grows by at most one frame (<= max_frame_bytes, checked in decode) per frame received.
    in.unexpected->data.resize(h.offset + h.length);
    return in.unexpected->data.data() + h.offset;
  }
  // Only this peer's reader uses it, and it never resizes under its own pending read.
  p.discard.resize(std::max(p.discard.size(), static_cast<std::size_t>(h.length)));
  return p.discard.data();
}

void Context::abort_incoming(Peer& p, const FrameHeader& h) {
  auto& in = p.incoming;
  if (!in.active || in.tag != h.tag || in.received != h.offset || in.total != h.total) {
    throw ProtocolError(fmt::format("{}: abort frame from {} (tag {}, offset {}) matches no message "
                                    "being received", self(), p.describe(), h.tag, h.offset));
  }
  // Its bytes so far are garbage to it, but the next message of its tag starts at offset 0.
  if (in.recv) {
    p.recvs[in.tag].push_front(std::move(in.recv));
  } else if (Unexpected* u = in.unexpected) {
    if (u->claimed) p.recvs[u->tag].push_front(std::move(u->claimed));
    std::erase_if(p.unexpected, [u](auto& x) { return x.get() == u; });
  }
  in = {};
}

void Context::deliver(Peer& p, const FrameHeader& h) {
  auto& in = p.incoming;
  in.received += h.length;
  if (Unexpected* u = in.unexpected; u && u->claimed) {
    // A recv was posted while this message arrived: it gets what came so far, and the rest of
    // the frames land in it directly.
    auto op = std::move(u->claimed);
    in.unexpected = nullptr;
    if (u->total > op->capacity) {
      complete(*op, std::make_exception_ptr(ProtocolError(fmt::format(
                        "{}: message of {} bytes from {} (tag {}) exceeds the recv range of {}",
                        self(), u->total, p.describe(), u->tag, op->capacity))));
    } else {
      std::memcpy(op->data, u->data.data(), u->data.size());
      in.recv = std::move(op);
    }
    std::erase_if(p.unexpected, [u](auto& x) { return x.get() == u; });
  }
  if (in.received < in.total) return;
  if (in.recv) {
    in.recv->bytes = in.total;
    complete(*in.recv);
  } else if (in.unexpected) {
    in.unexpected->complete = true;
  }
  in = {};
}

asio::awaitable<void> Context::read_loop(Peer& p) {
  ++open_reads_;
  auto socket = p.socket;
  const std::uint64_t generation = p.generation;
  const auto max_frame = static_cast<std::uint64_t>(config_.max_frame_bytes);
  FrameBytes header;
  try {
    for (;;) {
      co_await asio::async_read(*socket, asio::buffer(header), asio::use_awaitable);
      if (p.generation != generation) break;
      p.mid_frame = true;
      p.last_progress = Clock::now();
      FrameHeader h = decode(header, max_frame, p.describe());
      heard(p);
      if (h.kind == FrameKind::kHeartbeat) {
        if (header_crc(h) != h.crc) {
          throw ProtocolError(fmt::format("{}: heartbeat from {}: CRC32C mismatch", self(),
                                          p.describe()));
        }
        p.mid_frame = false;
        continue;
      }
      if (h.kind == FrameKind::kAbort) {
        if (header_crc(h) != h.crc) {
          throw ProtocolError(fmt::format("{}: abort frame from {}: CRC32C mismatch", self(),
                                          p.describe()));
        }
        abort_incoming(p, h);
        p.mid_frame = false;
        continue;
      }
      std::byte* into = place(p, h);
      if (h.length > 0) {
        co_await asio::async_read(*socket, asio::buffer(into, h.length), TransferAll{},
                                 asio::use_awaitable);
        if (p.generation != generation) break;
      }
      p.mid_frame = false;
      p.last_progress = Clock::now();
      if (payload_crc(header_crc(h), {into, h.length}) != h.crc) {
        throw ProtocolError(fmt::format("{}: frame from {} (tag {}, offset {}, {} bytes): CRC32C "
                                        "mismatch", self(), p.describe(), h.tag, h.offset, h.length));
      }
      received_ += h.length;
      if (p.incoming.recv && p.incoming.recv->abandoned) {  // cancelled while this frame landed
        complete(*p.incoming.recv, cancelled_error());
        p.incoming.recv = nullptr;
      }
      deliver(p, h);
    }
  } catch (const boost::system::system_error& e) {
    if (p.generation == generation && !p.error && !closing_) {
      bool eof = e.code() == asio::error::eof;
      fail(p, std::make_exception_ptr(PeerLost(fmt::format(
                  "{}: {} {}{}", self(), p.describe(),
                  eof ? "closed the connection" : "connection failed: " + e.code().message(),
                  p.incoming.active ? fmt::format(" while sending a message of {} bytes (tag {})",
                                                  p.incoming.total, p.incoming.tag)
                                    : ""))));
    }
  } catch (const TransportError& e) {
    if (p.generation == generation) {
      spdlog::warn("{}", e.what());
      fail(p, std::current_exception());
    }
  }
  --open_reads_;
}

asio::awaitable<void> Context::watchdog() {
  asio::steady_timer timer(io_);
  const auto stall = std::chrono::milliseconds(config_.recv_timeout_ms);
  for (;;) {
    timer.expires_after(std::chrono::milliseconds(20));
    co_await timer.async_wait(asio::use_awaitable);
    auto now = Clock::now();
    for (auto& slot : peers_) {
      if (!slot) continue;
      Peer& p = *slot;
      // Awaiting the dial of a rank that has left in order: say so now, not at the deadline
      // (the rendezvous is read every tenth tick).
      if (p.state == Peer::State::kConnecting && rank_ > p.rank && ++p.watch_ticks % 10 == 0 &&
          fail_if_left(p)) {
        continue;
      }
      // And whether it is there at all, once a second (after the first: a live peer dials at
      // once, and each probe is a connection it accepts and sees close).
      if (p.state == Peer::State::kConnecting && rank_ > p.rank && p.watch_ticks % 50 == 0 &&
          !p.probing && !rendezvous_->fixed_address(p.rank)) {
        p.probing = true;
        asio::co_spawn(io_, probe(p), asio::detached);
      }
      if (p.state == Peer::State::kConnecting && now >= p.connect_deadline) {
        // Name what was awaited: the peer's address, or where it should have been published.
        const std::string awaited =
            p.address.empty() ? fmt::format("its address never appeared in the {}",
                                             rendezvous_->describe())
                              : rank_ < p.rank ? "dialing it" : "awaiting its dial";
        fail(p, std::make_exception_ptr(PeerLost(fmt::format(
                    "{}: no connection with {} within transport.connect_timeout_ms = {} ({})",
                    self(), p.describe(), config_.connect_timeout_ms, awaited))));
      } else if (p.state == Peer::State::kReady && (p.mid_frame || p.writing) &&
                 now - p.last_progress > stall) {
        fail(p, std::make_exception_ptr(PeerLost(fmt::format(
                    "{}: {} stalled for transport.recv_timeout_ms = {} while {}", self(),
                    p.describe(), config_.recv_timeout_ms,
                    p.mid_frame ? "receiving a frame" : "sending"))));
      } else if (p.state == Peer::State::kReady && !p.error && !p.writing && !closing_ &&
                 now - p.last_sent >= heartbeat_every_) {
        send_heartbeat(p);
      }
    }
  }
}

}  // namespace murmur::transport::tcp
