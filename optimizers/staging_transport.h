// StagingTransport: the transport of a peer whose parameters live off the host (a GPU), as its
// algorithms see it. Everything is forwarded to the real transport; what it adds is device
// memory (register_device_region), taken one of two ways, an option of the exchange and not of
// the algorithm:
//  - direct, where the real transport reads device memory itself (UCX built with CUDA): the
//    region is the real transport's, and a send first waits for the device to finish writing;
//  - staged, everywhere else: through the device's pinned staging buffers, a message cut in
//    pieces of transport.chunk_bytes (the chunk field of its tag, transport/tag.h) so that the
//    copies and the wire overlap. A send downloads its pieces in order and posts each as soon as
//    its copy is done; a receive uploads each piece as it arrives and completes when the last
//    upload is done.
// Both ends must cut alike: the same chunk_bytes and message size (they run the same config),
// and a staged receive is for exactly the size sent. A message longer than one piece needs a
// base tag (step and chunk 0). Used like any Transport: by one thread at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "device/device.h"
#include "transport/tag.h"
#include "transport/transport.h"

namespace murmur::optimizers {

class StagingTransport final : public transport::Transport {
 public:
  // `inner` and `device` must outlive this transport.
  StagingTransport(transport::Transport& inner, device::Device& device, std::size_t chunk_bytes);

  // True iff device memory goes through pinned staging (false: straight to the real transport).
  bool staged() const { return !inner_.supports_device_memory(); }

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  std::string name() const override { return inner_.name(); }
  int tag_bits() const override { return inner_.tag_bits(); }
  std::unique_ptr<transport::Region> register_region(std::span<std::byte> bytes) override {
    return inner_.register_region(bytes);
  }
  bool supports_device_memory() const override { return true; }
  std::unique_ptr<transport::Region> register_device_region(std::span<std::byte> bytes) override;
  transport::Request send(int peer, transport::Tag tag, const transport::Region& from,
                          transport::ByteRange range) override;
  transport::Request recv(int peer, transport::Tag tag, transport::Region& into,
                          transport::ByteRange range) override;
  bool supports_put() const override { return inner_.supports_put(); }
  transport::Request put(int peer, const transport::Region& from, transport::ByteRange range,
                         std::span<const std::byte> remote_key, std::size_t remote_offset) override {
    return inner_.put(peer, from, range, remote_key, remote_offset);
  }
  bool test(transport::Request& request) override;
  bool wait(transport::Request& request, transport::Deadline deadline) override;
  void cancel(transport::Request& request) override;
  std::optional<transport::Clock::duration> silent_for(int peer) const override {
    return inner_.silent_for(peer);
  }
  void drop(int peer) override { inner_.drop(peer); }
  std::uint64_t bytes_sent() const override { return inner_.bytes_sent(); }
  std::uint64_t bytes_received() const override { return inner_.bytes_received(); }

  // The byte ranges a staged message of `bytes` is cut into (exposed for tests): piece k is
  // [k * piece_bytes(bytes), ...), the last one shorter.
  std::size_t piece_bytes(std::size_t bytes) const;

 private:
  struct Staged;  // the state of one staged send or receive
  // The pieces `range` of a StagedRegion is cut into, none posted yet. Throws Error for a range
  // that is not whole floats, or a multi-piece message under a tag that is not a base tag.
  std::shared_ptr<Staged> cut(bool is_send, int peer, transport::Tag tag,
                              const transport::Region& region, transport::ByteRange range) const;
  bool advance(Staged& op);
  // Posts the pieces of every staged send whose download is done: sends move on whichever
  // request the caller waits for (a rank that waits for its receives first must not hold back
  // the sends its peer waits for).
  void progress();

  transport::Transport& inner_;
  device::Device& device_;
  std::size_t chunk_bytes_;
  transport::TagLayout layout_;
  std::vector<std::weak_ptr<Staged>> sending_;    // staged sends with pieces still to post
  std::vector<std::weak_ptr<Staged>> in_flight_;  // staged sends not yet complete
};

}  // namespace murmur::optimizers
