#include "optimizers/staging_transport.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "transport/collectives.h"

namespace murmur::optimizers {
namespace {

// Device memory with its pinned mirror, which is what the real transport sees.
class StagedRegion final : public transport::Region {
 public:
  StagedRegion(std::span<std::byte> device_bytes, device::Array mirror,
               std::unique_ptr<transport::Region> inner)
      : Region(device_bytes), mirror_(std::move(mirror)), inner_(std::move(inner)) {}
  std::span<float> device_floats() const {
    const std::span<std::byte> b = bytes();
    return {reinterpret_cast<float*>(b.data()), b.size() / sizeof(float)};
  }
  std::span<float> mirror() const { return mirror_.span(); }
  transport::Region& inner() const { return *inner_; }

 private:
  device::Array mirror_;
  std::unique_ptr<transport::Region> inner_;  // after the mirror it registers
};

std::size_t floats_of(std::size_t bytes) { return bytes / sizeof(float); }

}  // namespace

struct StagingTransport::Staged final : transport::RequestState {
  struct Piece {
    transport::Tag tag = 0;
    std::span<float> device, mirror;
    transport::ByteRange wire;  // the piece's bytes in the mirror's registration
    transport::Request inner;   // the real transport's send or receive
    // Send: the download (shared by the sends of the same bytes in flight); receive: the upload.
    std::shared_ptr<device::Fence> fence;
    bool posted = false;        // send: handed to the real transport
  };
  bool is_send = false;
  std::size_t total = 0;
  const StagedRegion* region = nullptr;
  std::vector<Piece> pieces;
};

StagingTransport::StagingTransport(transport::Transport& inner, device::Device& device,
                                   std::size_t chunk_bytes)
    : inner_(inner),
      device_(device),
      chunk_bytes_(std::max<std::size_t>(sizeof(float), chunk_bytes / sizeof(float) * sizeof(float))),
      layout_(inner) {}

std::size_t StagingTransport::piece_bytes(std::size_t bytes) const {
  // Pieces of chunk_bytes, or larger where the tag's chunk field could not number them all.
  const std::size_t max = static_cast<std::size_t>(layout_.max_chunks());
  const std::size_t needed = (floats_of(bytes) + max - 1) / max * sizeof(float);
  return std::max(chunk_bytes_, needed);
}

std::unique_ptr<transport::Region> StagingTransport::register_device_region(
    std::span<std::byte> bytes) {
  if (!staged()) return inner_.register_device_region(bytes);
  if (bytes.size() % sizeof(float) != 0) {
    throw Error(fmt::format("staging: a device region of {} bytes is not whole floats",
                            bytes.size()));
  }
  device::Array mirror = device_.staging(floats_of(bytes.size()));
  auto inner = inner_.register_region(mirror.bytes());
  return std::make_unique<StagedRegion>(bytes, std::move(mirror), std::move(inner));
}

std::shared_ptr<StagingTransport::Staged> StagingTransport::cut(bool is_send, int peer,
                                                                 transport::Tag tag,
                                                                 const transport::Region& region,
                                                                 transport::ByteRange range) const {
  const auto& staged = static_cast<const StagedRegion&>(region);
  if (range.offset % sizeof(float) != 0 || range.size % sizeof(float) != 0) {
    throw Error(fmt::format("staging: {} bytes [{}, +{}) are not whole floats",
                            is_send ? "sending" : "receiving into", range.offset, range.size));
  }
  const std::size_t piece = piece_bytes(range.size);
  const std::size_t count = std::max<std::size_t>(1, (range.size + piece - 1) / piece);
  if (count > 1 && !layout_.is_base(tag)) {
    throw Error(fmt::format("staging: a {}-byte message needs {} pieces, but tag {} has its step "
                            "or chunk taken", range.size, count, layout_.describe(tag)));
  }
  auto op = std::make_shared<Staged>();
  op->peer = peer;
  op->tag = tag;
  op->is_send = is_send;
  op->total = range.size;
  op->region = &staged;
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t begin = k * piece, len = std::min(piece, range.size - std::min(range.size, begin));
    Staged::Piece p;
    p.tag = count == 1 ? tag : layout_.with(tag, 0, k);
    const std::size_t first = floats_of(range.offset + begin);
    p.device = staged.device_floats().subspan(first, floats_of(len));
    p.mirror = staged.mirror().subspan(first, floats_of(len));
    p.wire = {range.offset + begin, len};
    op->pieces.push_back(std::move(p));
  }
  return op;
}

transport::Request StagingTransport::send(int peer, transport::Tag tag,
                                          const transport::Region& from, transport::ByteRange range) {
  if (dynamic_cast<const StagedRegion*>(&from) == nullptr) {
    // Host memory, or device memory the real transport reads itself: it must be written first.
    if (!staged() && !device_.host_memory()) device_.synchronize();
    return inner_.send(peer, tag, from, range);
  }
  auto op = cut(/*is_send=*/true, peer, tag, from, range);
  // The same bytes already on their way (a neighbor exchange sends one range to every neighbor):
  // their device memory is untouched until those sends complete, so the mirror already holds
  // them, and copying again would write the mirror under a send that reads it.
  std::erase_if(in_flight_, [](const std::weak_ptr<Staged>& w) {
    const auto other = w.lock();
    return !other || other->done;
  });
  std::shared_ptr<Staged> same;
  for (const auto& w : in_flight_) {
    const auto other = w.lock();
    if (other->region == op->region && other->pieces.size() == op->pieces.size() &&
        other->pieces.front().wire.offset == op->pieces.front().wire.offset && other->total == op->total) {
      same = other;
      break;
    }
  }
  for (std::size_t k = 0; k < op->pieces.size(); ++k) {
    Staged::Piece& p = op->pieces[k];
    p.fence = same ? same->pieces[k].fence : device_.download_async(p.mirror, p.device);
  }
  in_flight_.push_back(op);
  sending_.push_back(op);
  progress();
  return transport::Request(op);
}

void StagingTransport::progress() {
  std::erase_if(sending_, [&](const std::weak_ptr<Staged>& weak) {
    const std::shared_ptr<Staged> op = weak.lock();
    if (!op || op->done) return true;
    // In order: a piece goes out once its download is done, and not before the one before.
    for (Staged::Piece& p : op->pieces) {
      if (p.posted) continue;
      if (!p.fence->ready()) return false;
      p.inner = inner_.send(op->peer, p.tag, op->region->inner(), p.wire);
      p.posted = true;
    }
    return true;  // all posted: advance() on its own request does the rest
  });
}

transport::Request StagingTransport::recv(int peer, transport::Tag tag, transport::Region& into,
                                          transport::ByteRange range) {
  if (dynamic_cast<StagedRegion*>(&into) == nullptr) return inner_.recv(peer, tag, into, range);
  auto op = cut(/*is_send=*/false, peer, tag, into, range);
  for (Staged::Piece& p : op->pieces) {
    p.inner = inner_.recv(peer, p.tag, op->region->inner(), p.wire);
  }
  return transport::Request(op);
}

// Moves `op` on as far as it goes without blocking; returns true iff it is complete. On a
// failure of any piece, gives up the others and rethrows it (the request is then done with it).
bool StagingTransport::advance(Staged& op) {
  if (op.done) {
    if (op.error) std::rethrow_exception(op.error);
    return true;
  }
  try {
    bool complete = true;
    for (Staged::Piece& p : op.pieces) {
      if (op.is_send) {
        // progress() posts the pieces; a send is complete once every one has left.
        if (!p.posted || !inner_.test(p.inner)) complete = false;
        continue;
      }
      if (!p.fence) {
        if (!inner_.test(p.inner)) {
          complete = false;
          continue;
        }
        if (p.inner.state()->bytes != p.wire.size) {
          throw ProtocolError(fmt::format(
              "{}: rank {}: rank {} sent {} bytes as a piece of {} under tag {}, expected {} "
              "(are the models the same size, and transport.chunk_bytes the same on every peer?)",
              inner_.name(), inner_.rank(), op.peer, p.inner.state()->bytes, op.total,
              layout_.describe(p.tag), p.wire.size));
        }
        p.fence = device_.upload_async(p.device, p.mirror);
      }
      if (!p.fence->ready()) complete = false;
    }
    if (!complete) return false;
  } catch (...) {
    op.error = std::current_exception();
    for (Staged::Piece& p : op.pieces) {
      transport::cancel_quietly(inner_, p.inner);
      if (p.fence) p.fence->wait();  // no copy touches the buffers once we have given up
    }
    op.done = true;
    throw;
  }
  op.bytes = op.total;
  op.done = true;
  return true;
}

bool StagingTransport::test(transport::Request& request) {
  progress();
  auto* op = dynamic_cast<Staged*>(request.state());
  return op == nullptr ? inner_.test(request) : advance(*op);
}

bool StagingTransport::wait(transport::Request& request, transport::Deadline deadline) {
  auto* op = dynamic_cast<Staged*>(request.state());
  if (op == nullptr) {
    // The real transport's own request; staged sends still to post move on meanwhile.
    for (;;) {
      progress();
      if (sending_.empty()) return inner_.wait(request, deadline);
      const auto now = transport::Clock::now();
      if (inner_.wait(request, std::min(deadline, now + std::chrono::milliseconds(1)))) return true;
      if (transport::Clock::now() >= deadline) return false;
    }
  }
  for (;;) {
    progress();
    if (advance(*op)) return true;
    const auto now = transport::Clock::now();
    if (now >= deadline) return false;
    // Block a little on what is in flight: the first piece still on the wire, else a copy.
    const auto until = std::min(deadline, now + std::chrono::milliseconds(1));
    bool blocked = false;
    for (Staged::Piece& p : op->pieces) {
      const bool on_wire = op->is_send ? p.posted : !p.fence;
      if (on_wire && p.inner.valid() && !p.inner.state()->done) {
        try {
          inner_.wait(p.inner, until);
        } catch (...) {
          // advance() gives up the rest and reports it.
        }
        blocked = true;
        break;
      }
    }
    if (!blocked) {
      for (Staged::Piece& p : op->pieces) {
        if (p.fence && !p.fence->ready()) {
          p.fence->wait();
          break;
        }
      }
    }
  }
}

void StagingTransport::cancel(transport::Request& request) {
  auto* op = dynamic_cast<Staged*>(request.state());
  if (op == nullptr) return inner_.cancel(request);
  for (Staged::Piece& p : op->pieces) {
    if (p.inner.valid() && !p.inner.state()->done) inner_.cancel(p.inner);
    if (p.fence) p.fence->wait();
  }
  if (!op->done) {
    op->error = std::make_exception_ptr(TransportError(fmt::format(
        "{}: rank {}: staged {} with rank {} cancelled", inner_.name(), inner_.rank(),
        op->is_send ? "send" : "receive", op->peer)));
    op->done = true;
  }
}

}  // namespace murmur::optimizers
