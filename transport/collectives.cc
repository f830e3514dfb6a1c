#include "transport/collectives.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "transport/tag.h"

namespace murmur::transport {

void wait_or_lost(Transport& transport, Request& request, std::chrono::milliseconds timeout,
                  const char* what) {
  if (transport.wait(request, deadline_after(timeout))) return;
  RequestState* s = request.state();
  transport.cancel(request);  // so the caller may reuse the buffer once we have thrown
  throw PeerLost(fmt::format("{}: rank {}: rank {} did not complete {} (tag {:#x}) within {} ms",
                             transport.name(), transport.rank(), s->peer, what, s->tag,
                             timeout.count()));
}

void wait_for_piece(Transport& transport, Request& request, std::size_t expected,
                    std::chrono::milliseconds timeout, const char* what) {
  wait_or_lost(transport, request, timeout, what);
  const RequestState* s = request.state();
  if (s->bytes == expected) return;
  throw ProtocolError(fmt::format("{}: rank {}: rank {} sent {} bytes for {} ({}), expected {}",
                                  transport.name(), transport.rank(), s->peer, s->bytes, what,
                                  TagLayout(transport).describe(s->tag), expected));
}

void cancel_quietly(Transport& transport, Request& request) noexcept {
  if (!request.valid() || request.state()->done.load()) return;
  try {
    transport.cancel(request);
  } catch (...) {
  }
}

CancelOnUnwind::~CancelOnUnwind() {
  if (std::uncaught_exceptions() <= uncaught_) return;
  // Already failing: the exception in flight is the one to report.
  for (auto* list : lists_) {
    for (auto& r : *list) cancel_quietly(transport_, r);
  }
}

void neighbor_exchange(Transport& transport, Tag tag, const Region& from, ByteRange out,
                       std::span<const int> send_to, Region& into, std::span<const ByteRange> in,
                       std::span<const int> recv_from, const CollectiveOptions& options) {
  if (in.size() != recv_from.size()) {
    throw TransportError("neighbor_exchange: one receive range per source rank is needed");
  }
  // Receives first, so that no message has to wait in an unexpected-message buffer.
  std::vector<Request> recvs, sends;
  CancelOnUnwind guard(transport);
  guard.watch(recvs);
  guard.watch(sends);
  for (std::size_t i = 0; i < recv_from.size(); ++i) {
    recvs.push_back(transport.recv(recv_from[i], tag, into, in[i]));
  }
  for (int peer : send_to) sends.push_back(transport.send(peer, tag, from, out));
  for (std::size_t i = 0; i < recvs.size(); ++i) {
    wait_for_piece(transport, recvs[i], in[i].size, options.timeout, "a neighbor exchange receive");
  }
  for (auto& s : sends) wait_or_lost(transport, s, options.timeout, "a neighbor exchange send");
}

AllreducePlace allreduce_place(const Transport& transport, std::span<const int> ranks,
                               const Region& region, std::span<const float> data, Tag tag,
                               const char* what) {
  AllreducePlace place;
  place.subset = ranks;
  if (ranks.empty()) {
    place.ranks = static_cast<std::size_t>(transport.world_size());
    place.index = static_cast<std::size_t>(transport.rank());
  } else {
    place.ranks = ranks.size();
    place.index = static_cast<std::size_t>(
        std::find(ranks.begin(), ranks.end(), transport.rank()) - ranks.begin());
    if (place.index >= place.ranks) {
      throw TransportError(fmt::format("{}: rank {} is not among set_ranks()", what,
                                       transport.rank()));
    }
  }
  if (!TagLayout(transport).is_base(tag)) {
    throw TransportError(fmt::format("{}: tag {:#x} has its step or chunk set", what, tag));
  }
  const auto* base = region.bytes().data();
  const auto* bytes = reinterpret_cast<const std::byte*>(data.data());
  if (bytes < base || bytes + data.size_bytes() > base + region.bytes().size()) {
    throw TransportError(fmt::format("{}: data is not inside the region", what));
  }
  place.data_offset = static_cast<std::size_t>(bytes - base);
  return place;
}

std::size_t piece_elements(const Transport& transport, std::size_t chunk_bytes,
                           std::size_t element_bytes, std::size_t count) {
  const auto max_chunks = static_cast<std::size_t>(TagLayout(transport).max_chunks());
  return std::max<std::size_t>({1, chunk_bytes / element_bytes, (count + max_chunks - 1) / max_chunks});
}

void RingAllreduce::run(Region& region, std::span<float> data, ReduceOp op, Tag tag) {
  // Position r in a ring of N: the world, or the subset set_ranks() gave.
  const AllreducePlace place = allreduce_place(transport_, ranks_, region, data, tag, "ring_allreduce");
  const std::size_t N = place.ranks, n = data.size(), r = place.index;
  if (N == 1 || n == 0) return;
  const TagLayout layout(transport_);

  // Segment s is [begin(s), begin(s+1)); each splits into the same number of chunks so that
  // chunk c of step k feeds chunk c of step k+1 (the pipeline).
  auto begin = [&](std::size_t s) { return s * n / N; };
  const std::size_t max_segment = (n + N - 1) / N;
  const std::size_t chunk_floats =
      piece_elements(transport_, options_.chunk_bytes, sizeof(float), max_segment);
  const std::size_t chunks = std::max<std::size_t>(1, (max_segment + chunk_floats - 1) / chunk_floats);
  struct Span { std::size_t first, count; };
  auto chunk = [&](std::size_t s, std::size_t c) {
    std::size_t len = begin(s + 1) - begin(s);
    std::size_t a = begin(s) + c * len / chunks, b = begin(s) + (c + 1) * len / chunks;
    return Span{a, b - a};
  };
  // Scratch: two slots (steps alternate) of `chunks` fixed-size cells, so that a chunk of step
  // k+2 never lands on a chunk of step k that is still to be reduced (segments differ in length).
  const std::size_t cell = (max_segment + chunks - 1) / chunks;
  if (scratch_.floats.size() < 2 * chunks * cell) {
    scratch_.region.reset();  // the old registration goes before its memory
    scratch_ = ops_.scratch(transport_, 2 * chunks * cell);
  }
  // Step k sends segment (r - k) and receives segment (r - k - 1) mod N; steps 0..N-2 reduce
  // (reduce-scatter), steps N-1..2N-3 copy (allgather).
  const std::size_t steps = 2 * (N - 1);
  const int left = place.rank_at((r + N - 1) % N), right = place.rank_at((r + 1) % N);
  auto send_segment = [&](std::size_t k) { return (r + N * steps - k) % N; };
  auto recv_segment = [&](std::size_t k) { return (r + N * steps - k - 1) % N; };
  auto tag_of = [&](std::size_t k, std::size_t c) { return layout.with(tag, k, c); };
  auto in_data = [&](Span s) { return place.floats(s.first, s.count); };
  auto cell_of = [&](std::size_t k, std::size_t c) { return ((k % 2) * chunks + c) * cell; };
  auto in_scratch = [&](std::size_t k, std::size_t c, Span s) {
    return ByteRange{cell_of(k, c) * sizeof(float), s.count * sizeof(float)};
  };

  std::vector<Request> recvs(steps * chunks), last_send(N * chunks), all_sends;
  CancelOnUnwind guard(transport_);
  guard.watch(recvs);
  guard.watch(all_sends);
  auto post_recv = [&](std::size_t k, std::size_t c) {
    std::size_t seg = recv_segment(k);
    Span s = chunk(seg, c);
    if (k < N - 1) {
      recvs[k * chunks + c] = transport_.recv(left, tag_of(k, c), *scratch_.region, in_scratch(k, c, s));
    } else {
      // Allgather lands in `data`: an earlier send of the same bytes must have left.
      if (last_send[seg * chunks + c].valid()) {
        wait_or_lost(transport_, last_send[seg * chunks + c], options_.timeout, "an allreduce send");
      }
      recvs[k * chunks + c] = transport_.recv(left, tag_of(k, c), region, in_data(s));
    }
  };
  auto send = [&](std::size_t k, std::size_t c) {
    std::size_t seg = send_segment(k);
    Request q = transport_.send(right, tag_of(k, c), region, in_data(chunk(seg, c)));
    last_send[seg * chunks + c] = q;
    all_sends.push_back(q);
  };

  for (std::size_t k = 0; k < std::min<std::size_t>(2, steps); ++k) {
    for (std::size_t c = 0; c < chunks; ++c) post_recv(k, c);
  }
  for (std::size_t c = 0; c < chunks; ++c) send(0, c);
  const float scale = op == ReduceOp::kAverage ? 1.0f / static_cast<float>(N) : 1.0f;
  for (std::size_t k = 0; k < steps; ++k) {
    for (std::size_t c = 0; c < chunks; ++c) {
      const Span s = chunk(recv_segment(k), c);
      wait_for_piece(transport_, recvs[k * chunks + c], s.count * sizeof(float), options_.timeout,
                     "a ring allreduce receive");
      if (k < N - 1) {
        const std::span<float> x = data.subspan(s.first, s.count);
        ops_.add(x, scratch_.floats.subspan(cell_of(k, c), s.count));
        if (k == N - 2 && scale != 1.0f) ops_.scale(x, scale);  // this segment is now the full sum
      }
      if (k + 1 < steps) send(k + 1, c);
      if (k + 2 < steps) post_recv(k + 2, c);
    }
  }
  for (auto& q : all_sends) wait_or_lost(transport_, q, options_.timeout, "an allreduce send");
}

Allreduce::Allreduce(Transport& transport, CollectiveOptions options, FloatOps& ops)
    : options_(options),
      world_(static_cast<std::size_t>(transport.world_size())),
      ranks_(world_),
      ring_(transport, options, ops),
      halving_(transport, options, ops),
      direct_(transport, options, ops) {}

void Allreduce::set_ranks(std::vector<int> ranks) {
  ranks_ = ranks.empty() ? world_ : ranks.size();
  ring_.set_ranks(ranks);
  halving_.set_ranks(ranks);
  direct_.set_ranks(std::move(ranks));
}

AllreduceAlgorithm auto_allreduce(std::size_t ranks, double bytes, double chunk_bytes) {
  if (ranks > 2 && ranks <= kDirectMaxRanks && bytes / static_cast<double>(ranks) <= chunk_bytes) {
    return AllreduceAlgorithm::kDirect;
  }
  return ranks <= kRingMaxRanks ? AllreduceAlgorithm::kRing
                                : AllreduceAlgorithm::kHalvingDoubling;
}

AllreduceAlgorithm Allreduce::algorithm_for(std::size_t ranks, std::size_t floats) const {
  if (options_.allreduce != AllreduceAlgorithm::kAuto) return options_.allreduce;
  return auto_allreduce(ranks, static_cast<double>(floats * sizeof(float)),
                        static_cast<double>(options_.chunk_bytes));
}

void Allreduce::run(Region& region, std::span<float> data, ReduceOp op, Tag tag) {
  switch (algorithm_for(ranks_, data.size())) {
    case AllreduceAlgorithm::kDirect:
      direct_.run(region, data, op, tag);
      break;
    case AllreduceAlgorithm::kHalvingDoubling:
      halving_.run(region, data, op, tag);
      break;
    default:
      ring_.run(region, data, op, tag);
  }
}

void ring_allreduce(Transport& transport, Region& region, std::span<float> data, ReduceOp op,
                    Tag tag, const CollectiveOptions& options) {
  RingAllreduce(transport, options).run(region, data, op, tag);
}

}  // namespace murmur::transport
