// Internal to the tcp backend: the state behind tcp::Transport. One I/O thread runs io_ and owns
// every Peer (sockets, queues, matching); the user's thread only posts operations to it and waits
// on completion flags. Coroutines (Asio awaitables) read and write each connection.
// Lock order: mu_ is a leaf; it guards only the completion wake-up (RequestState::done).
#pragma once

#include <utility>  // Boost 1.74's awaitable.hpp uses std::exchange without including <utility>

#include <boost/asio.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/config.h"
#include "transport/frame.h"
#include "transport/rendezvous.h"
#include "transport/transport.h"

namespace murmur::transport::tcp {

namespace asio = boost::asio;
using Socket = asio::ip::tcp::socket;

// A completion condition for asio::async_read/async_write that lets one system call move all
// that is left. asio's own transfer_all caps each call at 64 KiB (default_max_transfer_size): 16
// sendmsg and 16 recv per MiB, each woken separately, which took the loopback exchange to about
// half of what the same kernel does with larger calls.
struct TransferAll {
  std::size_t operator()(const boost::system::error_code& error, std::size_t) const {
    return error ? 0 : std::numeric_limits<std::size_t>::max();
  }
};

struct SendOp : RequestState {
  const std::byte* data = nullptr;
  std::size_t size = 0;
  bool heartbeat = false;  // a header-only heartbeat frame (queued by the watchdog), no data
  // Cancelled while its frames were being written: the writer ends it after the frame on the
  // wire, and sends an abort frame instead of the rest.
  bool abandoned = false;
};
struct RecvOp : RequestState {
  std::byte* data = nullptr;
  std::size_t capacity = 0;
  // Cancelled while a frame was landing in `data`: the reader ends it once that frame is in,
  // and discards the rest of the message.
  bool abandoned = false;
};

// "IP:port" as the tcp backend publishes and reads it (a rendezvous, a static list, its own
// host and port); nullopt for anything else, a "left" mark among them (context.cc).
std::optional<asio::ip::tcp::endpoint> parse_endpoint(const std::string& address);

// A message that arrived (or is arriving) before its recv was posted.
struct Unexpected {
  Tag tag = 0;
  std::uint64_t total = 0;
  std::vector<std::byte> data;  // grows frame by frame, each growth bounded by max_frame_bytes
  bool complete = false;
  // A recv posted while this message was still arriving: it takes over at the next frame end
  // (the frame being read may still be landing in `data`).
  std::shared_ptr<RecvOp> claimed;
};

// One remote rank. Touched only on the I/O thread.
struct Peer {
  enum class State { kIdle, kConnecting, kReady, kFailed };
  int rank = -1;
  std::string address;  // "host:port" once known
  State state = State::kIdle;
  std::shared_ptr<Socket> socket;
  std::deque<std::shared_ptr<SendOp>> sends;  // FIFO; the front is being written while writing
  bool writing = false;
  std::map<Tag, std::deque<std::shared_ptr<RecvOp>>> recvs;  // posted, in order, per tag
  std::deque<std::unique_ptr<Unexpected>> unexpected;        // in arrival order
  // Frames of one message are contiguous on the stream, so one message arrives at a time.
  struct Incoming {
    bool active = false;
    Tag tag = 0;
    std::uint64_t total = 0;
    std::uint64_t received = 0;
    std::shared_ptr<RecvOp> recv;       // the posted recv being filled, or
    Unexpected* unexpected = nullptr;   // the buffer being filled, or neither: discarded
  } incoming;
  // Where the frames of a message nobody takes land (too long for its recv, or cancelled): this
  // peer's own, since every peer's reader may be mid-frame at once, and a shared buffer mixed
  // their bytes, and grew under a read still landing in it.
  std::vector<std::byte> discard;
  std::exception_ptr error;  // once set, every pending and later op fails with it
  Deadline connect_deadline{};
  Clock::time_point last_progress{};
  Clock::time_point last_sent{};  // the last frame written: a heartbeat is due when long ago
  int watch_ticks = 0;            // watchdog ticks while awaiting its dial (rendezvous reads)
  bool probing = false;           // probe() of its published address under way
  bool mid_frame = false;
  bool reading = false;
  // A rank seen to die may come back (restarted, with a new address): each connection is one
  // generation, and a coroutine of an older one touches nothing when it wakes up.
  std::uint64_t generation = 0;
  std::string published_at_failure;  // its rendezvous address when it failed
  bool dropped = false;  // drop() was called for the process of this connection
  // Came back (a new process) before the caller dropped the old one: the next drop() is that
  // one's, and leaves the new connection alone (a rank restarted before its death was noticed
  // would otherwise be cut off by the survivors' late verdict on the old process).
  bool old_undropped = false;

  std::string describe() const;  // "rank 3 (127.0.0.1:4000)"
};

class Context {
 public:
  Context(const TransportConfig& config, int rank, int world_size,
          std::shared_ptr<Rendezvous> rendezvous);
  ~Context();

  // --- user thread ---
  Request post_send(int peer, Tag tag, const std::byte* data, std::size_t size);
  Request post_recv(int peer, Tag tag, std::byte* data, std::size_t capacity);
  bool wait(RequestState& op, Deadline deadline);
  void cancel(const std::shared_ptr<RequestState>& op);
  std::exception_ptr cancelled_error() const;

  Peer& peer(int rank);
  void start_send(const std::shared_ptr<SendOp>& op);
  void start_recv(const std::shared_ptr<RecvOp>& op);
  // Transport::silent_for and drop.
  Clock::duration silent_for(int rank) const;
  void drop(int rank);

  // --- I/O thread ---
  void complete(RequestState& op, std::exception_ptr error = nullptr);
  void fail(Peer& p, std::exception_ptr error);
  // A failed peer back to kIdle for a fresh connection: whatever was pending on the old one
  // fails, and what arrived from it (unexpected messages) is dropped.
  void reset(Peer& p);
  // `p`'s address as the rendezvous has it now, "" if none. An entry the rendezvous refuses (a
  // loopback address another host published: a ConfigError) fails `p` with that error, which
  // the coroutines that dial and probe would otherwise swallow; `published_quietly` just
  // returns "" for it.
  std::string published(Peer& p);
  std::string published_quietly(int rank) noexcept;
  // True iff a failed peer has published another address since: it was restarted.
  bool came_back(const Peer& p);
  // True iff `p` has published that it left the run in order (kLeftMark); then fails it, saying
  // so. Also true when its entry was refused (published() failed it).
  bool fail_if_left(Peer& p);
  void connect(Peer& p);                     // connect.cc: dial or await the accept
  void on_connected(Peer& p, std::shared_ptr<Socket> socket);
  asio::awaitable<void> accept_loop();       // connect.cc
  asio::awaitable<void> accept_one(std::shared_ptr<Socket> socket);
  asio::awaitable<void> dial(Peer& p);
  // Awaiting the dial of a lower rank: connects to the address it published, and closes again.
  // Refused there, the process is gone (it was killed after it published), and `p` fails now
  // rather than at the connect deadline: a rank restarted beside a dead one meets the others.
  asio::awaitable<void> probe(Peer& p);
  asio::awaitable<void> read_loop(Peer& p);  // connection.cc
  asio::awaitable<void> write_loop(Peer& p);
  asio::awaitable<void> watchdog();
  std::byte* place(Peer& p, const FrameHeader& h);
  void deliver(Peer& p, const FrameHeader& h);
  // An abort frame: the message under way from `p` ends here, unfinished; a recv it was filling
  // waits on for another message of its tag.
  void abort_incoming(Peer& p, const FrameHeader& h);
  void heard(const Peer& p);           // a frame (or a connection attempt) from p, now
  void send_heartbeat(Peer& p);
  void run_io();  // the I/O thread's loop
  std::string self() const;  // "tcp: rank 0 (127.0.0.1:4000)"

  // Declared in creation order; io_ outlives everything that posts to it.
  TransportConfig config_;
  int rank_;
  int world_size_;
  std::string secret_;
  std::shared_ptr<Rendezvous> rendezvous_;
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::string address_;
  std::vector<std::unique_ptr<Peer>> peers_;
  bool closing_ = false;
  std::atomic<int> open_reads_{0};
  // Per rank: when a frame last arrived from it (or this rank began connecting to it), in
  // steady-clock ticks; written by the I/O thread, read by silent_for() on the user's thread.
  std::vector<std::atomic<Clock::rep>> heard_;
  Clock::duration heartbeat_every_{};
  std::atomic<std::uint64_t> sent_{0};
  std::atomic<std::uint64_t> received_{0};
  std::mutex mu_;  // guards the done-flag wake-up only (leaf lock)
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace murmur::transport::tcp
