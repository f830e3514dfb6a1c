#include "transport/half_ring_allreduce.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "transport/tag.h"

namespace murmur::transport {

HalfRingAllreduce::HalfRingAllreduce(Transport& transport, CollectiveOptions options,
                                     HalfFormat format, bool stochastic, std::uint64_t seed)
    : transport_(transport),
      options_(options),
      format_(format),
      stochastic_(stochastic),
      rng_(Rng(seed).fork(static_cast<std::uint64_t>(transport.rank()))) {}

void HalfRingAllreduce::reserve(std::size_t n, std::size_t scratch) {
  auto grow = [&](std::vector<std::uint16_t>& v, std::unique_ptr<Region>& region, std::size_t size) {
    if (region && v.size() >= size) return;
    region.reset();
    v.assign(std::max<std::size_t>(size, 1), 0);
    region = transport_.register_region(std::as_writable_bytes(std::span(v)));
  };
  grow(wire_, wire_region_, n);
  grow(scratch_, scratch_region_, scratch);
}

void HalfRingAllreduce::run(std::span<float> data, ReduceOp op, Tag tag) {
  const TagLayout layout(transport_);
  if (!layout.is_base(tag)) {
    throw TransportError(fmt::format("half_ring_allreduce: tag {:#x} has its step or chunk set", tag));
  }
  const std::size_t N = static_cast<std::size_t>(transport_.world_size()), n = data.size();
  const std::size_t r = static_cast<std::size_t>(transport_.rank());
  if (N == 1 || n == 0) return;
  // The schedule of RingAllreduce::run, in units of 16-bit values: segment s is
  // [begin(s), begin(s+1)), each cut into the same number of chunks so that the pipeline feeds
  // chunk c of step k into chunk c of step k+1.
  auto begin = [&](std::size_t s) { return s * n / N; };
  const std::size_t max_segment = (n + N - 1) / N;
  const std::size_t chunk_values =
      piece_elements(transport_, options_.chunk_bytes, sizeof(std::uint16_t), max_segment);
  const std::size_t chunks = std::max<std::size_t>(1, (max_segment + chunk_values - 1) / chunk_values);
  struct Span { std::size_t first, count; };
  auto chunk = [&](std::size_t s, std::size_t c) {
    const std::size_t len = begin(s + 1) - begin(s);
    const std::size_t a = begin(s) + c * len / chunks, b = begin(s) + (c + 1) * len / chunks;
    return Span{a, b - a};
  };
  const std::size_t cell = (max_segment + chunks - 1) / chunks;
  reserve(n, 2 * chunks * cell);
  const std::size_t steps = 2 * (N - 1);
  const int left = static_cast<int>((r + N - 1) % N), right = static_cast<int>((r + 1) % N);
  auto send_segment = [&](std::size_t k) { return (r + N * steps - k) % N; };
  auto recv_segment = [&](std::size_t k) { return (r + N * steps - k - 1) % N; };
  auto tag_of = [&](std::size_t k, std::size_t c) { return layout.with(tag, k, c); };
  auto in_wire = [&](Span s) { return ByteRange{s.first * 2, s.count * 2}; };
  auto cell_of = [&](std::size_t k, std::size_t c) { return ((k % 2) * chunks + c) * cell; };
  Rng* rng = stochastic_ ? &rng_ : nullptr;

  std::vector<Request> recvs(steps * chunks), last_send(N * chunks), all_sends;
  CancelOnUnwind guard(transport_);
  guard.watch(recvs);
  guard.watch(all_sends);
  auto post_recv = [&](std::size_t k, std::size_t c) {
    const std::size_t seg = recv_segment(k);
    const Span s = chunk(seg, c);
    if (k < N - 1) {
      recvs[k * chunks + c] = transport_.recv(left, tag_of(k, c), *scratch_region_,
                                              ByteRange{cell_of(k, c) * 2, s.count * 2});
    } else {
      // The allgather lands in the 16-bit image: an earlier send of the same bytes must have left.
      if (last_send[seg * chunks + c].valid()) {
        wait_or_lost(transport_, last_send[seg * chunks + c], options_.timeout, "an allreduce send");
      }
      recvs[k * chunks + c] = transport_.recv(left, tag_of(k, c), *wire_region_, in_wire(s));
    }
  };
  auto send = [&](std::size_t k, std::size_t c) {
    const std::size_t seg = send_segment(k);
    const Span s = chunk(seg, c);
    // The reduce-scatter's partial sums are narrowed as they leave; the allgather forwards the
    // 16-bit copy it received (or, at its first step, the one the owner made).
    if (k < N - 1) {
      narrow(data.subspan(s.first, s.count), std::span(wire_).subspan(s.first, s.count), format_, rng);
    }
    Request q = transport_.send(right, tag_of(k, c), *wire_region_, in_wire(s));
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
      wait_for_piece(transport_, recvs[k * chunks + c], s.count * 2, options_.timeout,
                     "a 16-bit ring allreduce receive");
      const std::span<float> x = data.subspan(s.first, s.count);
      const std::span<std::uint16_t> w = std::span(wire_).subspan(s.first, s.count);
      if (k < N - 1) {
        widen_add(std::span(scratch_).subspan(cell_of(k, c), s.count), x, format_);
        if (k == N - 2) {
          // This segment's sum is complete here: scaled in fp32, narrowed once, and this rank
          // keeps the widened copy, which is what every other rank will receive.
          if (scale != 1.0f) {
            for (float& v : x) v *= scale;
          }
          narrow(x, w, format_, rng);
          widen(w, x, format_);
        }
      } else {
        widen(w, x, format_);
      }
      if (k + 1 < steps) {
        // The first allgather step sends what k = N-2 narrowed: no narrowing in send().
        send(k + 1, c);
      }
      if (k + 2 < steps) post_recv(k + 2, c);
    }
  }
  for (auto& q : all_sends) wait_or_lost(transport_, q, options_.timeout, "an allreduce send");
}

}  // namespace murmur::transport
