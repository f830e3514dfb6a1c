// Allreduce in two steps, every rank talking to every other (collectives.h): the direct
// reduce-scatter, then the direct allgather. Ranks are numbered by their index i among those
// taking part; index s owns segment s = [s n / N, (s+1) n / N) of the data.
//   step 0: i sends segment j to index j, for every j != i, and receives segment i from every
//     other index into its own slot of the scratch; it adds them into its segment, in the
//     fixed order i-1, i-2, ... (mod N), which is also the order they tend to arrive in, since
//     index j sends to j+1 first.
//   step 1: i sends its summed segment to every other index and receives theirs into the data.
// Each element is summed on its owner only, then copied, so every rank ends with the bitwise
// same floats. The bytes are the ring's, 2(N-1)/N of the data; the latencies 2 instead of
// 2(N-1). With few ranks on one machine, each of the ring's steps waits for a neighbor to be
// scheduled, and the direct one waits twice.
#include <algorithm>

#include "core/error.h"
#include "transport/collectives.h"
#include "transport/tag.h"

namespace murmur::transport {

void DirectAllreduce::run(Region& region, std::span<float> data, ReduceOp op, Tag tag) {
  const AllreducePlace place =
      allreduce_place(transport_, ranks_, region, data, tag, "direct allreduce");
  const std::size_t N = place.ranks, n = data.size(), i = place.index;
  if (N == 1 || n == 0) return;
  const TagLayout layout(transport_);
  auto begin = [&](std::size_t s) { return s * n / N; };
  const std::size_t max_segment = (n + N - 1) / N;
  // One slot per other index, in the order of `distance` (1 .. N-1) below.
  if (scratch_.floats.size() < (N - 1) * max_segment) {
    scratch_.region.reset();  // the old registration goes before its memory
    scratch_ = ops_.scratch(transport_, (N - 1) * max_segment);
  }
  const std::size_t piece =
      piece_elements(transport_, options_.chunk_bytes, sizeof(float), max_segment);
  auto for_pieces = [&](std::size_t count, auto&& each) {
    for (std::size_t a = 0, c = 0; a < count; a += piece, ++c) {
      each(a, std::min(piece, count - a), c);
    }
  };
  auto in_data = [&](std::size_t first, std::size_t count) { return place.floats(first, count); };

  std::vector<Request> recvs, sends;
  CancelOnUnwind guard(transport_);
  guard.watch(recvs);
  guard.watch(sends);
  auto wait_all = [&](std::vector<Request>& requests, const char* what) {
    for (auto& r : requests) wait_or_lost(transport_, r, options_.timeout, what);
    requests.clear();
  };

  // Step 0: the reduce-scatter. Index i - d lands in slot d - 1.
  const std::size_t mine = begin(i), mine_count = begin(i + 1) - mine;
  for (std::size_t d = 1; d < N; ++d) {
    const int from = place.rank_at((i + N - d) % N);
    const std::size_t slot = (d - 1) * max_segment;
    for_pieces(mine_count, [&](std::size_t a, std::size_t len, std::size_t c) {
      recvs.push_back(transport_.recv(from, layout.with(tag, 0, c), *scratch_.region,
                                      ByteRange{(slot + a) * sizeof(float), len * sizeof(float)}));
    });
  }
  for (std::size_t d = 1; d < N; ++d) {
    const std::size_t j = (i + d) % N;
    const std::size_t first = begin(j), count = begin(j + 1) - first;
    for_pieces(count, [&](std::size_t a, std::size_t len, std::size_t c) {
      sends.push_back(
          transport_.send(place.rank_at(j), layout.with(tag, 0, c), region, in_data(first + a, len)));
    });
  }
  const std::span<float> x = data.subspan(mine, mine_count);
  std::size_t next = 0;  // recvs are in slot order, pieces in order within a slot
  for (std::size_t d = 1; d < N; ++d) {
    const std::size_t slot = (d - 1) * max_segment;
    for_pieces(mine_count, [&](std::size_t a, std::size_t len, std::size_t) {
      wait_for_piece(transport_, recvs[next++], len * sizeof(float), options_.timeout,
                     "a direct allreduce receive");
      ops_.add(x.subspan(a, len), scratch_.floats.subspan(slot + a, len));
    });
  }
  recvs.clear();
  if (op == ReduceOp::kAverage) ops_.scale(x, 1.0f / static_cast<float>(N));
  // The allgather lands in the other segments, which step 0's sends read: they must have left.
  wait_all(sends, "a direct allreduce send");

  // Step 1: the allgather.
  std::vector<std::size_t> expected;  // each receive's bytes
  for (std::size_t d = 1; d < N; ++d) {
    const std::size_t j = (i + N - d) % N;
    const std::size_t first = begin(j), count = begin(j + 1) - first;
    for_pieces(count, [&](std::size_t a, std::size_t len, std::size_t c) {
      recvs.push_back(
          transport_.recv(place.rank_at(j), layout.with(tag, 1, c), region, in_data(first + a, len)));
      expected.push_back(len * sizeof(float));
    });
  }
  for (std::size_t d = 1; d < N; ++d) {
    const int to = place.rank_at((i + d) % N);
    for_pieces(mine_count, [&](std::size_t a, std::size_t len, std::size_t c) {
      sends.push_back(transport_.send(to, layout.with(tag, 1, c), region, in_data(mine + a, len)));
    });
  }
  for (std::size_t r = 0; r < recvs.size(); ++r) {
    wait_for_piece(transport_, recvs[r], expected[r], options_.timeout, "a direct allreduce receive");
  }
  wait_all(sends, "a direct allreduce send");
}

}  // namespace murmur::transport
