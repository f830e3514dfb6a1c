#include "transport/tcp/bootstrap.h"

#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "transport/frame.h"

namespace murmur::transport {

namespace {
constexpr std::uint64_t kMaxBlob = std::uint64_t{64} << 20;
}  // namespace

TcpBootstrap::TcpBootstrap(const TransportConfig& config, int rank, int world_size)
    : TcpBootstrap(config, rank, world_size, make_rendezvous(config, world_size, rank, "bootstrap-")) {}

TcpBootstrap::TcpBootstrap(const TransportConfig& config, int rank, int world_size,
                           std::shared_ptr<Rendezvous> rendezvous)
    : transport_(config, rank, world_size, std::move(rendezvous)) {}

std::vector<std::vector<std::byte>> TcpBootstrap::exchange(std::span<const int> peers,
                                                           std::span<const std::byte> mine,
                                                           Deadline deadline) {
  return swap(peers, mine, deadline, nullptr);
}

std::vector<std::vector<std::byte>> TcpBootstrap::exchange_with_live(
    std::span<const int> peers, std::span<const std::byte> mine, Deadline deadline,
    std::vector<std::string>& missed) {
  missed.assign(peers.size(), std::string());
  return swap(peers, mine, deadline, &missed);
}

std::vector<std::vector<std::byte>> TcpBootstrap::swap(std::span<const int> peers,
                                                       std::span<const std::byte> mine,
                                                       Deadline deadline,
                                                       std::vector<std::string>* missed) {
  // Two messages per peer: the 8-byte length, then the blob, so no side guesses a size.
  const Tag size_tag = round_ * 2, blob_tag = round_ * 2 + 1;
  ++round_;
  auto wait_for = [&](Request& r, int peer, const char* what) {
    if (!transport_.wait(r, deadline)) {
      throw PeerLost(fmt::format("bootstrap: rank {}: rank {} did not send its {} before the "
                                 "deadline", rank(), peer, what));
    }
  };
  std::array<std::byte, 8> my_size;
  store_le<std::uint64_t>(my_size.data(), mine.size());
  Region size_out(my_size);
  // const_cast: a send only reads, but Region holds a mutable span for recv's sake.
  Region blob_out({const_cast<std::byte*>(mine.data()), mine.size()});
  std::vector<std::array<std::byte, 8>> sizes(peers.size());
  std::vector<std::unique_ptr<Region>> size_in;
  std::vector<Request> sends, size_recvs;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    size_in.push_back(std::make_unique<Region>(sizes[i]));
    size_recvs.push_back(transport_.recv(peers[i], size_tag, *size_in.back(), {0, 8}));
    sends.push_back(transport_.send(peers[i], size_tag, size_out, {0, 8}));
    sends.push_back(transport_.send(peers[i], blob_tag, blob_out, {0, mine.size()}));
  }
  std::vector<std::vector<std::byte>> blobs(peers.size());
  for (std::size_t i = 0; i < peers.size(); ++i) {
    try {
      wait_for(size_recvs[i], peers[i], "blob size");
      auto n = load_le<std::uint64_t>(sizes[i].data());
      if (n > kMaxBlob) {
        throw ProtocolError(fmt::format("bootstrap: rank {}: rank {} announced a blob of {} "
                                        "bytes", rank(), peers[i], n));
      }
      blobs[i].resize(n);
      Region in(blobs[i]);
      Request r = transport_.recv(peers[i], blob_tag, in, {0, n});
      wait_for(r, peers[i], "blob");
      wait_for(sends[2 * i], peers[i], "acknowledgement");
      wait_for(sends[2 * i + 1], peers[i], "acknowledgement");
    } catch (const PeerLost& e) {
      if (missed == nullptr) throw;
      (*missed)[i] = e.what();
      blobs[i].clear();
    }
  }
  return blobs;
}

std::vector<Bootstrap::Met> TcpBootstrap::answer(std::span<const int> peers,
                                                 std::span<const std::byte> mine) {
  // The tags of a first exchange (round 0), which a restarted rank starts with.
  constexpr Tag kSizeTag = 0, kBlobTag = 1;
  // A rank that is still dead fails a receive at once: ask again this much later.
  constexpr auto kRetry = std::chrono::milliseconds(100);
  std::vector<Met> met;
  const Clock::time_point now = Clock::now();
  // test() rethrows a failure; here every failure means "not (or no longer) coming".
  auto finished = [&](Request& r) {
    try {
      return transport_.test(r) ? 1 : 0;
    } catch (const std::exception&) {
      return -1;
    }
  };
  for (int peer : peers) {
    Answering& a = answering_[peer];
    std::erase_if(a.sends, [&](Request& r) { return finished(r) != 0; });
    if (!a.size_recv.valid()) {
      if (now < a.next_post) continue;
      a.size_in = std::make_unique<Region>(a.size);
      a.size_recv = transport_.recv(peer, kSizeTag, *a.size_in, {0, a.size.size()});
    }
    if (!a.blob_recv.valid()) {
      const int done = finished(a.size_recv);
      if (done < 0) {
        a.size_recv = {};
        a.next_post = now + kRetry;
      }
      if (done <= 0) continue;
      const auto n = load_le<std::uint64_t>(a.size.data());
      if (n > kMaxBlob) {
        spdlog::warn("bootstrap: rank {}: rank {} announced a blob of {} bytes; not answered",
                     rank(), peer, n);
        a.size_recv = {};
        continue;
      }
      a.blob.assign(n, std::byte{0});
      a.blob_in = std::make_unique<Region>(a.blob);
      a.blob_recv = transport_.recv(peer, kBlobTag, *a.blob_in, {0, n});
    }
    const int done = finished(a.blob_recv);
    if (done == 0) continue;
    a.size_recv = {};
    a.blob_recv = {};
    if (done < 0) continue;
    // Our reply, as exchange() on the other end awaits it; its buffers live in `a` until sent.
    for (Request& r : a.sends) transport_.cancel(r);  // a reply to an earlier restart, if still out
    a.sends.clear();
    a.reply.assign(mine.begin(), mine.end());
    store_le<std::uint64_t>(a.reply_size.data(), a.reply.size());
    a.reply_out.clear();
    a.reply_out.push_back(std::make_unique<Region>(a.reply_size));
    a.reply_out.push_back(std::make_unique<Region>(a.reply));
    a.sends.push_back(transport_.send(peer, kSizeTag, *a.reply_out[0], {0, a.reply_size.size()}));
    a.sends.push_back(transport_.send(peer, kBlobTag, *a.reply_out[1], {0, a.reply.size()}));
    met.push_back(Met{peer, a.blob});
  }
  return met;
}

}  // namespace murmur::transport
