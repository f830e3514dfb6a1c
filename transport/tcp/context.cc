// Construction, teardown, the user-thread API and matching of tcp::Transport.
#include "transport/tcp/transport.h"

#include <algorithm>
#include <cstring>
#include <future>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "transport/secret.h"
#include "transport/tcp/context.h"

namespace murmur::transport::tcp {

std::string Peer::describe() const {
  return address.empty() ? fmt::format("rank {}", rank) : fmt::format("rank {} ({})", rank, address);
}

std::optional<asio::ip::tcp::endpoint> parse_endpoint(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(address.substr(0, colon), ec);
  const std::string port = address.substr(colon + 1);
  if (ec || port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535) {
    return std::nullopt;
  }
  return asio::ip::tcp::endpoint(ip, static_cast<unsigned short>(std::stoi(port)));
}

Context::Context(const TransportConfig& config, int rank, int world_size,
                 std::shared_ptr<Rendezvous> rendezvous)
    : config_(config),
      rank_(rank),
      world_size_(world_size),
      secret_(load_secret(config)),
      rendezvous_(std::move(rendezvous)),
      acceptor_(io_),
      heard_(static_cast<std::size_t>(std::max(world_size, 0))) {
  if (rank < 0 || rank >= world_size) {
    throw ConfigError(fmt::format("tcp: rank {} outside a world of {}", rank, world_size));
  }
  // Five heartbeats per peer timeout: a peer is declared silent only after several in a row
  // went missing, not after one late one. Never more than one a second: timeouts of minutes
  // do not need more, and 10 ms at least, so that a tiny timeout does not flood the link.
  heartbeat_every_ = std::clamp<Clock::duration>(
      std::chrono::milliseconds(config.peer_timeout_ms) / 5, std::chrono::milliseconds(10),
      std::chrono::seconds(1));
  const Clock::rep start = Clock::now().time_since_epoch().count();
  for (auto& h : heard_) h.store(start);
  std::string listen = rendezvous_->fixed_address(rank).value_or(
      fmt::format("{}:{}", config.host, config.port));
  const auto parsed = parse_endpoint(listen);
  if (!parsed) {
    throw ConfigError(fmt::format("transport.host/port: \"{}\" is not an IP:port", listen));
  }
  const asio::ip::tcp::endpoint endpoint = *parsed;
  boost::system::error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw TransportError(fmt::format("tcp: rank {}: cannot listen on {}: {}", rank, listen, ec.message()));
  auto bound = acceptor_.local_endpoint();
  address_ = fmt::format("{}:{}", bound.address().to_string(), bound.port());
  peers_.resize(world_size);
  rendezvous_->publish(rank, address_);
  asio::co_spawn(io_, accept_loop(), asio::detached);
  asio::co_spawn(io_, watchdog(), asio::detached);
  thread_ = std::thread([this] { run_io(); });
}

Context::~Context() {
  // Half-close every connection and keep reading until the peers close theirs too (or a short
  // linger passes): closing with unread bytes would send RST and lose what we last wrote.
  asio::post(io_, [this] {
    closing_ = true;
    for (auto& p : peers_) {
      if (p && p->socket && p->state == Peer::State::kReady) {
        boost::system::error_code ec;
        p->socket->shutdown(Socket::shutdown_send, ec);
      }
    }
  });
  auto linger = Clock::now() + std::chrono::milliseconds(250);
  while (open_reads_.load() > 0 && Clock::now() < linger) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  io_.stop();
  thread_.join();
  for (auto& p : peers_) {
    if (p && p->socket) {
      boost::system::error_code ec;
      p->socket->close(ec);
    }
  }
  // Not on a crash (no destructor runs): a rank that died may be restarted, and its peers must
  // then wait for it.
  try {
    rendezvous_->publish(rank_, std::string(kLeftMark) + address_);
  } catch (const std::exception& e) {
    spdlog::warn("{}: could not say in the {} that this rank left: {}", self(),
                 rendezvous_->describe(), e.what());
  }
}

void Context::run_io() {
  // Polls (a non-blocking epoll_wait per pass) for transport.poll_spin_us after the last handler
  // ran, then sleeps until the next event. Most of a transfer's events come microseconds apart:
  // sleeping between them (and being woken, in a VM through the hypervisor) cost the loopback
  // point-to-point stream a quarter of its speed. The spin stops with the traffic, so a peer
  // that computes while nothing moves gets its cores back within that time.
  const auto spin = std::chrono::microseconds(config_.poll_spin_us);
  auto last_event = Clock::now();
  while (!io_.stopped()) {
    if (spin.count() > 0 && io_.poll() > 0) {
      last_event = Clock::now();
    } else if (spin.count() == 0 || Clock::now() - last_event >= spin) {
      io_.run_one();
      last_event = Clock::now();
    }
  }
}

std::string Context::self() const { return fmt::format("tcp: rank {} ({})", rank_, address_); }

Peer& Context::peer(int rank) {
  auto& p = peers_.at(rank);
  if (!p) {
    p = std::make_unique<Peer>();
    p->rank = rank;
  }
  return *p;
}

Request Context::post_send(int peer_rank, Tag tag, const std::byte* data, std::size_t size) {
  auto op = std::make_shared<SendOp>();
  op->peer = peer_rank;
  op->tag = tag;
  op->data = data;
  op->size = size;
  op->bytes = size;
  asio::post(io_, [this, op] { start_send(op); });
  return Request(op);
}

Request Context::post_recv(int peer_rank, Tag tag, std::byte* data, std::size_t capacity) {
  auto op = std::make_shared<RecvOp>();
  op->peer = peer_rank;
  op->tag = tag;
  op->data = data;
  op->capacity = capacity;
  asio::post(io_, [this, op] { start_recv(op); });
  return Request(op);
}

void Context::heard(const Peer& p) {
  heard_[static_cast<std::size_t>(p.rank)].store(Clock::now().time_since_epoch().count(),
                                                 std::memory_order_relaxed);
}

Clock::duration Context::silent_for(int rank) const {
  const Clock::time_point last{Clock::duration(
      heard_.at(static_cast<std::size_t>(rank)).load(std::memory_order_relaxed))};
  return std::max(Clock::duration::zero(), Clock::now() - last);
}

void Context::send_heartbeat(Peer& p) {
  auto op = std::make_shared<SendOp>();
  op->peer = p.rank;
  op->heartbeat = true;
  p.sends.push_back(op);
  p.writing = true;
  asio::co_spawn(io_, write_loop(p), asio::detached);
}

void Context::drop(int rank) {
  std::promise<void> done;
  asio::post(io_, [&] {
    Peer& p = peer(rank);
    if (p.old_undropped) {
      p.old_undropped = false;
      return done.set_value();
    }
    p.dropped = true;
    if (p.state != Peer::State::kFailed) {
      fail(p, std::make_exception_ptr(PeerLost(fmt::format(
                  "{}: dropped {}: this rank counts it as dead", self(), p.describe()))));
    }
    done.set_value();
  });
  done.get_future().wait();
}

void Context::complete(RequestState& op, std::exception_ptr error) {
  op.error = std::move(error);
  {
    std::lock_guard lock(mu_);
    op.done.store(true);
  }
  cv_.notify_all();
}

bool Context::wait(RequestState& op, Deadline deadline) {
  std::unique_lock lock(mu_);
  return cv_.wait_until(lock, deadline, [&] { return op.done.load(); });
}

void Context::fail(Peer& p, std::exception_ptr error) {
  if (!p.error) p.error = error;
  if (p.state != Peer::State::kFailed) {
    p.published_at_failure = published_quietly(p.rank);
  }
  p.state = Peer::State::kFailed;
  if (p.socket) {
    boost::system::error_code ec;
    p.socket->close(ec);
  }
  for (auto& [tag, queue] : p.recvs) {
    for (auto& op : queue) complete(*op, p.error);
  }
  p.recvs.clear();
  if (p.incoming.recv) complete(*p.incoming.recv, p.error);
  for (auto& u : p.unexpected) {
    if (u->claimed) complete(*u->claimed, p.error);
    u->claimed = nullptr;
  }
  p.incoming = {};
  // A write in flight completes its own op when the write fails; fail the rest now.
  std::size_t keep = p.writing && !p.sends.empty() ? 1 : 0;
  while (p.sends.size() > keep) {
    complete(*p.sends.back(), p.error);
    p.sends.pop_back();
  }
}

void Context::reset(Peer& p) {
  for (auto& op : p.sends) {
    if (!op->done) complete(*op, p.error);
  }
  p.sends.clear();
  p.writing = false;
  p.unexpected.clear();
  p.incoming = {};
  p.error = nullptr;
  p.state = Peer::State::kIdle;
  p.socket.reset();
  p.address.clear();
  p.mid_frame = false;
  p.old_undropped = !p.dropped;
  p.dropped = false;
  ++p.generation;
  spdlog::info("{}: {} is back; accepting a fresh connection", self(), p.describe());
}

std::string Context::published(Peer& p) {
  try {
    return rendezvous_->try_lookup(p.rank).value_or("");
  } catch (const Error&) {
    fail(p, std::current_exception());
    return "";
  }
}

std::string Context::published_quietly(int rank) noexcept {
  try {
    return rendezvous_->try_lookup(rank).value_or("");
  } catch (...) {
    return "";
  }
}

bool Context::came_back(const Peer& p) {
  if (p.state != Peer::State::kFailed) return false;
  const std::string now = published_quietly(p.rank);
  return !now.empty() && !has_left(now) && now != p.published_at_failure;
}

bool Context::fail_if_left(Peer& p) {
  const std::string now = published(p);
  if (p.state == Peer::State::kFailed) return true;  // its entry was refused
  if (!has_left(now)) return false;
  fail(p, std::make_exception_ptr(PeerLeft(fmt::format(
              "{}: {} has left the run (it finished or was stopped in order: the {} says so)",
              self(), p.describe(), rendezvous_->describe()))));
  return true;
}

void Context::start_send(const std::shared_ptr<SendOp>& op) {
  Peer& p = peer(op->peer);
  if (came_back(p)) reset(p);
  if (p.error) return complete(*op, p.error);
  p.sends.push_back(op);
  if (p.state == Peer::State::kIdle) connect(p);
  if (p.state == Peer::State::kReady && !p.writing) {
    p.writing = true;  // before the spawn: co_spawn only queues the coroutine
    asio::co_spawn(io_, write_loop(p), asio::detached);
  }
}

void Context::start_recv(const std::shared_ptr<RecvOp>& op) {
  Peer& p = peer(op->peer);
  // Messages already (or partly) here are matched first, in arrival order, even from a peer
  // that has since closed.
  for (auto it = p.unexpected.begin(); it != p.unexpected.end(); ++it) {
    Unexpected& u = **it;
    if (u.tag != op->tag || u.claimed) continue;
    if (!u.complete) {
      u.claimed = op;  // deliver() hands over at the end of the frame being read
      return;
    }
    if (u.total > op->capacity) {
      complete(*op, std::make_exception_ptr(ProtocolError(fmt::format(
                        "{}: message of {} bytes from {} (tag {}) exceeds the recv range of {}",
                        self(), u.total, p.describe(), u.tag, op->capacity))));
    } else {
      if (!u.data.empty()) std::memcpy(op->data, u.data.data(), u.data.size());
      op->bytes = u.total;
      complete(*op);
    }
    p.unexpected.erase(it);
    return;
  }
  if (came_back(p)) reset(p);
  if (p.error) return complete(*op, p.error);
  p.recvs[op->tag].push_back(op);
  if (p.state == Peer::State::kIdle) connect(p);
}

void Context::cancel(const std::shared_ptr<RequestState>& state) {
  std::promise<void> done;
  bool finishing = false;  // a frame of it is on the wire: its loop ends it after that frame
  asio::post(io_, [&] {
    if (state->done) return done.set_value();
    Peer& p = peer(state->peer);
    auto queued = p.recvs.find(state->tag);
    if (queued != p.recvs.end()) {
      std::erase_if(queued->second, [&](auto& op) { return op.get() == state.get(); });
    }
    for (auto& u : p.unexpected) {
      if (u->claimed.get() == state.get()) u->claimed = nullptr;
    }
    // A transfer under way is not cut off mid-frame (the stream would lose its framing and the
    // connection with it, and the peer would take us for dead): the frame on the wire ends, the
    // rest of a send becomes an abort frame, the rest of a recv is read and discarded.
    const bool writing_it =
        p.writing && !p.sends.empty() && p.sends.front().get() == state.get();
    if (writing_it) {
      static_cast<SendOp&>(*state).abandoned = true;
      finishing = true;
    } else {
      std::erase_if(p.sends, [&](auto& op) { return op.get() == state.get(); });
    }
    if (p.incoming.recv.get() == state.get()) {
      if (p.mid_frame) {
        p.incoming.recv->abandoned = true;
        finishing = true;
      } else {
        p.incoming.recv = nullptr;
      }
    }
    if (!finishing && !state->done) complete(*state, cancelled_error());
    done.set_value();
  });
  done.get_future().wait();
  if (!finishing) return;
  // A live peer takes the frame on the wire within a heartbeat interval. One that does not (cut
  // off, frozen: often why we cancel) costs the connection, as a stall would after
  // transport.recv_timeout_ms: waiting that long here held a partitioned run up past its end.
  if (wait(*state, Clock::now() + heartbeat_every_)) return;
  std::promise<void> closed;
  asio::post(io_, [&] {
    if (!state->done) {
      Peer& p = peer(state->peer);
      fail(p, std::make_exception_ptr(PeerLost(fmt::format(
                  "{}: connection to {} closed: a transfer in progress was cancelled, and its "
                  "frame did not get across within {} ms", self(), p.describe(),
                  std::chrono::duration_cast<std::chrono::milliseconds>(heartbeat_every_).count()))));
    }
    closed.set_value();
  });
  closed.get_future().wait();
  // fail() ends a recv at once; a send ends when its write, on the closed socket, fails.
  while (!wait(*state, deadline_after(std::chrono::seconds(1)))) {
  }
}

std::exception_ptr Context::cancelled_error() const {
  return std::make_exception_ptr(TransportError(self() + ": request cancelled"));
}

// --- tcp::Transport: argument checks, then the Context ---

Transport::Transport(const TransportConfig& config, int rank, int world_size,
                     std::shared_ptr<Rendezvous> rendezvous)
    : context_(std::make_unique<Context>(config, rank, world_size, std::move(rendezvous))) {}
Transport::~Transport() = default;

std::string Transport::local_address() const { return context_->address_; }
int Transport::rank() const { return context_->rank_; }
int Transport::world_size() const { return context_->world_size_; }

std::unique_ptr<Region> Transport::register_region(std::span<std::byte> bytes) {
  return std::make_unique<Region>(bytes);
}

namespace {
void check_call(const Context& c, const char* call, int peer, std::span<std::byte> bytes,
                ByteRange range) {
  if (peer < 0 || peer >= c.world_size_ || peer == c.rank_) {
    throw TransportError(fmt::format("{}: {} to rank {}: not another rank of a world of {}",
                                     c.self(), call, peer, c.world_size_));
  }
  if (range.offset > bytes.size() || range.size > bytes.size() - range.offset) {
    throw TransportError(fmt::format("{}: {} to rank {}: range [{}, +{}) outside a region of {}",
                                     c.self(), call, peer, range.offset, range.size, bytes.size()));
  }
}
}  // namespace

Request Transport::send(int peer, Tag tag, const Region& from, ByteRange range) {
  check_call(*context_, "send", peer, from.bytes(), range);
  return context_->post_send(peer, tag, from.bytes().data() + range.offset, range.size);
}

Request Transport::recv(int peer, Tag tag, Region& into, ByteRange range) {
  check_call(*context_, "recv", peer, into.bytes(), range);
  return context_->post_recv(peer, tag, into.bytes().data() + range.offset, range.size);
}

bool Transport::test(Request& request) {
  RequestState* s = request.state();
  if (!s->done.load()) return false;
  if (s->error) std::rethrow_exception(s->error);
  return true;
}

bool Transport::wait(Request& request, Deadline deadline) {
  if (!context_->wait(*request.state(), deadline)) return false;
  return test(request);
}

void Transport::cancel(Request& request) {
  if (request.valid()) context_->cancel(request.shared());
}

std::optional<Clock::duration> Transport::silent_for(int peer) const {
  return context_->silent_for(peer);
}

void Transport::drop(int peer) {
  if (peer >= 0 && peer < context_->world_size_ && peer != context_->rank_) context_->drop(peer);
}

std::uint64_t Transport::bytes_sent() const { return context_->sent_.load(); }
std::uint64_t Transport::bytes_received() const { return context_->received_.load(); }

}  // namespace murmur::transport::tcp
