// Matching and completion of the inproc backend, under one lock per world. A completion wakes
// only the rank that posted the request (one condition variable per rank): with one shared
// condition variable, every message of a 1024-rank world woke all 1024 threads.
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"
#include "transport/inproc/transport.h"

namespace murmur::transport::inproc {

namespace {
struct Op : RequestState {
  int owner = 0;              // the rank that posted it, the one to wake when it completes
  std::byte* data = nullptr;  // the sender's bytes (read only) or the receiver's
  std::size_t size = 0;       // bytes to send, or the capacity of the recv
};
using Key = std::tuple<int, int, Tag>;  // (source, destination, tag)
}  // namespace

class World {
 public:
  explicit World(int size)
      : size_(size), wakeups_(size), dead_(size, false), sent_(size, 0), received_(size, 0) {}

  int size() const { return size_; }

  Request post(bool is_send, int self, int peer, Tag tag, std::byte* data, std::size_t size) {
    auto op = std::make_shared<Op>();
    op->owner = self;
    op->peer = peer;
    op->tag = tag;
    op->data = data;
    op->size = size;
    Key key = is_send ? Key{self, peer, tag} : Key{peer, self, tag};
    std::unique_lock lock(mu_);
    auto& mine = is_send ? sends_ : recvs_;
    auto& theirs = is_send ? recvs_ : sends_;
    auto match = theirs.find(key);
    if (match == theirs.end() || match->second.empty()) {
      if (dead_[peer]) {
        finish(*op, lost(self, peer));
      } else {
        mine[key].push_back(op);
      }
      return Request(op);
    }
    std::shared_ptr<Op> other = match->second.front();
    match->second.pop_front();
    Op& send = is_send ? *op : *other;
    Op& recv = is_send ? *other : *op;
    int from = std::get<0>(key), to = std::get<1>(key);
    if (send.size > recv.size) {
      finish(recv, std::make_exception_ptr(ProtocolError(fmt::format(
                       "inproc: rank {}: message of {} bytes from rank {} (tag {}) exceeds the "
                       "recv range of {}", to, send.size, from, tag, recv.size))));
      finish(send, nullptr);
      return Request(op);
    }
    // Copy outside the lock so that ranks copy in parallel; both ops are off the queues.
    ++copying_[from];
    ++copying_[to];
    lock.unlock();
    if (send.size > 0) std::memcpy(recv.data, send.data, send.size);
    lock.lock();
    --copying_[from];
    --copying_[to];
    if (killing_ > 0) copied_.notify_all();
    recv.bytes = send.size;
    sent_[from] += send.size;
    received_[to] += send.size;
    finish(send, nullptr);
    finish(recv, nullptr);
    return Request(op);
  }

  bool wait(RequestState& state, Deadline deadline) {
    auto& op = static_cast<Op&>(state);
    std::unique_lock lock(mu_);
    return wakeups_[op.owner].wait_until(lock, deadline, [&] { return op.done.load(); });
  }

  void cancel(RequestState& op) {
    std::lock_guard lock(mu_);
    if (op.done) return;
    for (auto* queues : {&sends_, &recvs_}) {
      for (auto& [key, q] : *queues) std::erase_if(q, [&](auto& o) { return o.get() == &op; });
    }
    finish(op, std::make_exception_ptr(TransportError("inproc: request cancelled")));
  }

  // Rank `r` is gone: ops of others that wait on it fail with PeerLost, its own are dropped.
  void kill(int r) {
    std::unique_lock lock(mu_);
    dead_[r] = true;
    // A copy in flight reads or writes r's buffers: they must outlive it.
    ++killing_;
    copied_.wait(lock, [&] { return copying_[r] == 0; });
    --killing_;
    for (auto* queues : {&sends_, &recvs_}) {
      for (auto& [key, q] : *queues) {
        auto [from, to, tag] = key;
        if (from != r && to != r) continue;
        int survivor = from == r ? to : from;
        for (auto& op : q) finish(*op, lost(survivor, r));
        q.clear();
      }
    }
  }

  std::uint64_t sent(int r) {
    std::lock_guard lock(mu_);
    return sent_[r];
  }
  std::uint64_t received(int r) {
    std::lock_guard lock(mu_);
    return received_[r];
  }

 private:
  static std::exception_ptr lost(int self, int peer) {
    return std::make_exception_ptr(
        PeerLost(fmt::format("inproc: rank {}: rank {} is gone", self, peer)));
  }
  // Called with mu_ held.
  void finish(RequestState& state, std::exception_ptr error) {
    auto& op = static_cast<Op&>(state);
    op.error = std::move(error);
    op.done.store(true);
    // notify_all: a rank may wait from more than one thread (its training and communication
    // threads), each on a request of its own.
    wakeups_[op.owner].notify_all();
  }

  int size_;
  std::mutex mu_;  // guards everything below
  std::vector<std::condition_variable> wakeups_;  // per rank: its requests completed
  std::condition_variable copied_;                 // a copy finished (for kill())
  int killing_ = 0;                                // kill()s waiting on copied_
  std::map<Key, std::deque<std::shared_ptr<Op>>> sends_, recvs_;
  std::vector<bool> dead_;
  std::vector<std::uint64_t> sent_, received_;
  std::vector<int> copying_ = std::vector<int>(size_, 0);  // copies in flight touching each rank
};

Transport::Transport(std::shared_ptr<World> world, int rank) : world_(std::move(world)), rank_(rank) {}
Transport::~Transport() { world_->kill(rank_); }
int Transport::world_size() const { return world_->size(); }

std::unique_ptr<Region> Transport::register_region(std::span<std::byte> bytes) {
  return std::make_unique<Region>(bytes);
}

namespace {
void check_call(int self, int size, const char* call, int peer, std::span<std::byte> bytes,
                ByteRange range) {
  if (peer < 0 || peer >= size || peer == self) {
    throw TransportError(fmt::format("inproc: rank {}: {} to rank {}: not another rank of {}",
                                     self, call, peer, size));
  }
  if (range.offset > bytes.size() || range.size > bytes.size() - range.offset) {
    throw TransportError(fmt::format("inproc: rank {}: {}: range [{}, +{}) outside a region of {}",
                                     self, call, range.offset, range.size, bytes.size()));
  }
}
}  // namespace

Request Transport::send(int peer, Tag tag, const Region& from, ByteRange range) {
  check_call(rank_, world_size(), "send", peer, from.bytes(), range);
  return world_->post(true, rank_, peer, tag, from.bytes().data() + range.offset, range.size);
}

Request Transport::recv(int peer, Tag tag, Region& into, ByteRange range) {
  check_call(rank_, world_size(), "recv", peer, into.bytes(), range);
  return world_->post(false, rank_, peer, tag, into.bytes().data() + range.offset, range.size);
}

bool Transport::test(Request& request) {
  RequestState* s = request.state();
  if (!s->done.load()) return false;
  if (s->error) std::rethrow_exception(s->error);
  return true;
}

bool Transport::wait(Request& request, Deadline deadline) {
  return world_->wait(*request.state(), deadline) && test(request);
}

void Transport::cancel(Request& request) {
  if (request.valid()) world_->cancel(*request.state());
}

std::uint64_t Transport::bytes_sent() const { return world_->sent(rank_); }
std::uint64_t Transport::bytes_received() const { return world_->received(rank_); }

std::vector<std::unique_ptr<transport::Transport>> make_world(int size) {
  auto world = std::make_shared<World>(size);
  std::vector<std::unique_ptr<transport::Transport>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<Transport>(world, r));
  return out;
}

}  // namespace murmur::transport::inproc
