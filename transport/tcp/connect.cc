// Connection setup of the tcp backend: the lower rank of a pair dials, the higher accepts, and
// both run the authenticated handshake (transport/handshake.h) before any frame is read.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "transport/handshake.h"
#include "transport/tcp/context.h"

namespace murmur::transport::tcp {

namespace {

void tune(Socket& s) {
  boost::system::error_code ec;
  s.set_option(asio::ip::tcp::no_delay(true), ec);
}

}  // namespace

void Context::connect(Peer& p) {
  p.state = Peer::State::kConnecting;
  heard(p);  // its silence counts from here: the connect timeout covers a peer that never comes
  p.connect_deadline = deadline_after(std::chrono::milliseconds(config_.connect_timeout_ms));
  if (rank_ < p.rank) asio::co_spawn(io_, dial(p), asio::detached);
  // Otherwise accept_loop() hands us the socket; the watchdog enforces the deadline.
}

void Context::on_connected(Peer& p, std::shared_ptr<Socket> socket) {
  tune(*socket);
  p.socket = std::move(socket);
  p.state = Peer::State::kReady;
  p.last_progress = p.last_sent = Clock::now();
  heard(p);
  asio::co_spawn(io_, read_loop(p), asio::detached);
  if (!p.sends.empty() && !p.writing) {
    p.writing = true;
    asio::co_spawn(io_, write_loop(p), asio::detached);
  }
}

asio::awaitable<void> Context::dial(Peer& p) {
  asio::steady_timer pause(io_);
  auto socket = std::make_shared<Socket>(io_);
  // Retry until the deadline: with a static list the peer may not be listening yet.
  while (p.state == Peer::State::kConnecting) {
    if (fail_if_left(p)) co_return;
    if (p.address.empty()) p.address = published(p);
    if (!p.address.empty()) {
      const auto endpoint = parse_endpoint(p.address);
      if (!endpoint) {
        fail(p, std::make_exception_ptr(ConfigError(fmt::format(
                    "{}: address of {} from {} is not IP:port", self(), p.describe(),
                    rendezvous_->describe()))));
        co_return;
      }
      boost::system::error_code ec;
      socket->close(ec);
      co_await socket->async_connect(*endpoint, asio::redirect_error(asio::use_awaitable, ec));
      if (!ec) break;
      if (ec == asio::error::connection_refused && !rendezvous_->fixed_address(p.rank)) {
        // A rank publishes its address only once it listens: refused there, it is gone (killed;
        // one that ends in order says "left"), unless it has published a new one since (it was
        // restarted), which is dialed next. Waiting out the connect timeout instead kept a
        // survivor in an agreement with a dead rank that nobody else had reported yet.
        const std::string now = published(p);
        if (p.state != Peer::State::kConnecting) co_return;  // its entry was refused
        if (now == p.address) {
          fail(p, std::make_exception_ptr(PeerLost(fmt::format(
                      "{}: {} refused the connection: nobody listens at its published address "
                      "any more", self(), p.describe()))));
          co_return;
        }
        p.address = now;
      }
    }
    pause.expires_after(std::chrono::milliseconds(20));
    co_await pause.async_wait(asio::use_awaitable);
  }
  if (p.state != Peer::State::kConnecting) co_return;  // the watchdog gave up on it
  p.socket = socket;  // the watchdog closes it if the handshake overruns the deadline
  try {
    Hello hello{static_cast<std::uint32_t>(rank_), static_cast<std::uint32_t>(world_size_),
                fresh_nonce()};
    auto hello_bytes = encode(hello);
    co_await asio::async_write(*socket, asio::buffer(hello_bytes), asio::use_awaitable);
    std::array<std::byte, Reply::kBytes> reply_bytes;
    co_await asio::async_read(*socket, asio::buffer(reply_bytes), asio::use_awaitable);
    Reply reply = decode_reply(reply_bytes, p.describe());
    if (reply.rank != static_cast<std::uint32_t>(p.rank) ||
        reply.world_size != static_cast<std::uint32_t>(world_size_)) {
      throw ProtocolError(fmt::format("{}: {} answered as rank {} of {}", self(), p.describe(),
                                      reply.rank, reply.world_size));
    }
    if (!mac_equal(reply.mac, handshake_mac(secret_, kReplyLabel, hello, reply.nonce, reply.rank))) {
      throw AuthError(fmt::format(
          "{}: handshake with {} failed: it does not hold our shared secret (compare "
          "transport.secret_file / ${} on both sides)", self(), p.describe(), config_.secret_env));
    }
    Proof proof{handshake_mac(secret_, kProofLabel, hello, reply.nonce, reply.rank)};
    auto proof_bytes = encode(proof);
    co_await asio::async_write(*socket, asio::buffer(proof_bytes), asio::use_awaitable);
  } catch (const boost::system::system_error& e) {
    if (p.state == Peer::State::kConnecting) {
      fail(p, std::make_exception_ptr(PeerLost(fmt::format(
                  "{}: {} dropped the connection during the handshake ({}); a peer that refuses "
                  "our secret does this", self(), p.describe(), e.code().message()))));
    }
    co_return;
  } catch (const TransportError&) {
    fail(p, std::current_exception());
    co_return;
  }
  if (p.state == Peer::State::kConnecting) on_connected(p, socket);
}

asio::awaitable<void> Context::probe(Peer& p) {
  const std::uint64_t generation = p.generation;
  const std::string address = published_quietly(p.rank);
  const auto endpoint = parse_endpoint(address);  // nothing to probe: dial() reports bad ones
  if (endpoint) {
    Socket socket(io_);
    boost::system::error_code ec, ignored;
    co_await socket.async_connect(*endpoint, asio::redirect_error(asio::use_awaitable, ec));
    socket.close(ignored);
    // Still awaited, and still at that address: a restarted process publishes a new one.
    if (ec == asio::error::connection_refused && p.generation == generation &&
        p.state == Peer::State::kConnecting &&
        published_quietly(p.rank) == address) {
      fail(p, std::make_exception_ptr(PeerLost(fmt::format(
                  "{}: {} refused a connection: nobody listens at its published address any "
                  "more (awaiting its dial)", self(), p.describe()))));
    }
  }
  p.probing = false;
}

asio::awaitable<void> Context::accept_loop() {
  for (;;) {
    auto socket = std::make_shared<Socket>(io_);
    boost::system::error_code ec;
    co_await acceptor_.async_accept(*socket, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) continue;
    asio::co_spawn(io_, accept_one(std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> Context::accept_one(std::shared_ptr<Socket> socket) {
  boost::system::error_code ec;
  auto remote = socket->remote_endpoint(ec);
  std::string from = ec ? "unknown" : fmt::format("{}:{}", remote.address().to_string(), remote.port());
  // A stranger that connects and says nothing must not hold the socket forever.
  auto timer = std::make_shared<asio::steady_timer>(io_);
  timer->expires_after(std::chrono::milliseconds(config_.connect_timeout_ms));
  timer->async_wait([socket](boost::system::error_code e) {
    if (!e) socket->close(e);
  });
  bool said_hello = false;
  try {
    std::array<std::byte, Hello::kBytes> hello_bytes;
    co_await asio::async_read(*socket, asio::buffer(hello_bytes), asio::use_awaitable);
    said_hello = true;
    Hello hello = decode_hello(hello_bytes, from);
    // The lower rank dials; anything else is a confused or hostile process.
    if (hello.world_size != static_cast<std::uint32_t>(world_size_) ||
        hello.rank >= static_cast<std::uint32_t>(rank_)) {
      throw ProtocolError(fmt::format("claims rank {} of {}", hello.rank, hello.world_size));
    }
    Reply reply{static_cast<std::uint32_t>(rank_), static_cast<std::uint32_t>(world_size_),
                fresh_nonce(), {}};
    reply.mac = handshake_mac(secret_, kReplyLabel, hello, reply.nonce, reply.rank);
    auto reply_bytes = encode(reply);
    co_await asio::async_write(*socket, asio::buffer(reply_bytes), asio::use_awaitable);
    std::array<std::byte, Proof::kBytes> proof_bytes;
    co_await asio::async_read(*socket, asio::buffer(proof_bytes), asio::use_awaitable);
    Proof proof = decode_proof(proof_bytes, from);
    if (!mac_equal(proof.mac, handshake_mac(secret_, kProofLabel, hello, reply.nonce, reply.rank))) {
      throw AuthError(fmt::format("rank {} does not hold our shared secret", hello.rank));
    }
    timer->cancel();
    Peer& p = peer(static_cast<int>(hello.rank));
    if (p.state == Peer::State::kReady) {
      throw ProtocolError(fmt::format("rank {} is already connected", hello.rank));
    }
    // A rank we saw die that proves it holds the secret is a restarted peer: take it back.
    if (p.state == Peer::State::kFailed) reset(p);
    p.address = from;
    on_connected(p, std::move(socket));
  } catch (const std::exception& e) {
    // Not an error of ours: refuse the stranger, log it, keep listening. One that closes
    // before its first byte is most likely a higher rank's probe (probe()).
    timer->cancel();
    socket->close(ec);
    const auto* io = dynamic_cast<const boost::system::system_error*>(&e);
    const bool probe = !said_hello && io != nullptr && io->code() == asio::error::eof;
    if (!closing_ && probe) {
      spdlog::debug("{}: a connection from {} closed before its hello (a probe)", self(), from);
    } else if (!closing_) {
      spdlog::warn("{}: refused a connection from {}: {}", self(), from, e.what());
    }
  }
}

}  // namespace murmur::transport::tcp
