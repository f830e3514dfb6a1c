// The inproc backend: the ranks of one world are threads of one process, sharing a World that
// matches sends with recvs by (source, destination, tag) in posting order and copies the bytes
// once, from the sender's buffer into the receiver's (a send completes when its recv has taken
// the bytes). For tests and for simulating many peers. Each Transport is driven by its own rank
// thread; the shared World is internally locked. Destroying a rank's Transport is how a rank
// dies: every rank waiting on it gets PeerLost.
#pragma once

#include <memory>
#include <vector>

#include "transport/transport.h"

namespace murmur::transport::inproc {

class World;

class Transport final : public transport::Transport {
 public:
  Transport(std::shared_ptr<World> world, int rank);
  ~Transport() override;

  int rank() const override { return rank_; }
  int world_size() const override;
  std::string name() const override { return "inproc"; }
  std::unique_ptr<Region> register_region(std::span<std::byte> bytes) override;
  Request send(int peer, Tag tag, const Region& from, ByteRange range) override;
  Request recv(int peer, Tag tag, Region& into, ByteRange range) override;
  bool test(Request& request) override;
  bool wait(Request& request, Deadline deadline) override;
  void cancel(Request& request) override;
  std::uint64_t bytes_sent() const override;
  std::uint64_t bytes_received() const override;

 private:
  std::shared_ptr<World> world_;
  int rank_;
};

// The `size` transports of a fresh world, rank i at index i; hand each to its own thread.
std::vector<std::unique_ptr<transport::Transport>> make_world(int size);

}  // namespace murmur::transport::inproc
