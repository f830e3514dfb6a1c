// Allreduce by recursive halving, then recursive doubling (collectives.h). Ranks are numbered
// by their index i among those taking part (the world, or set_ranks()); N = p + q with p the
// largest power of two <= N. The first 2q indices pair up: the even one folds its data into the
// odd one (step 0) and takes the result back at the end (the last step); the p others are the
// "virtual" ranks v = 0..p-1 that halve and double:
//   halving, level k (mask p >> (k+1)): v and v ^ mask hold the same window of the data; each
//     keeps one half (the lower if its mask bit is 0), sends the other and adds the partner's
//     copy of the half it keeps. After log2(p) levels v's window holds the sum over all N.
//   doubling, the levels in reverse: v sends its window and receives its partner's, so that
//     both hold the window of the level above; after log2(p) levels every v holds everything.
// Each element is summed on the one rank that owns its final window, then only copied, so
// every rank ends with the bitwise same floats, as the ring's do.
#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "core/error.h"
#include "transport/collectives.h"
#include "transport/tag.h"

namespace murmur::transport {

namespace {
struct Window {
  std::size_t first = 0, count = 0;  // floats of the data
};
}  // namespace

void HalvingDoublingAllreduce::run(Region& region, std::span<float> data, ReduceOp op, Tag tag) {
  const AllreducePlace place =
      allreduce_place(transport_, ranks_, region, data, tag, "halving-doubling allreduce");
  const std::size_t N = place.ranks, n = data.size(), i = place.index;
  if (N == 1 || n == 0) return;
  const TagLayout layout(transport_);

  const std::size_t p = std::bit_floor(N), q = N - p;
  const auto levels = static_cast<std::uint64_t>(std::countr_zero(p));
  const std::uint64_t last_step = 2 * levels + 1;
  if (last_step >= layout.max_steps()) {
    throw TransportError(fmt::format("halving-doubling allreduce: {} steps for {} ranks, but the "
                                     "tag layout numbers {}", last_step + 1, N, layout.max_steps()));
  }
  const bool folds = i < 2 * q && i % 2 == 0;  // hands its data on, takes the result back
  const std::size_t v = i < 2 * q ? i / 2 : i - q;
  auto index_of = [&](std::size_t virt) { return virt < q ? 2 * virt + 1 : virt + q; };

  // The partner's half (at most ceil(n/2)) or, folding in, its whole data.
  const std::size_t scratch_floats = q > 0 ? n : (n + 1) / 2;
  if (scratch_.floats.size() < scratch_floats) {
    scratch_.region.reset();  // the old registration goes before its memory
    scratch_ = ops_.scratch(transport_, scratch_floats);
  }
  // Calls each(first, count, c) for piece c of `window`, offsets relative to its start; both
  // sides cut a window of the same size alike.
  auto for_pieces = [&](const Window& window, auto&& each) {
    const std::size_t piece =
        piece_elements(transport_, options_.chunk_bytes, sizeof(float), window.count);
    for (std::size_t a = 0, c = 0; a < window.count; a += piece, ++c) {
      each(a, std::min(piece, window.count - a), c);
    }
  };
  auto in_data = [&](std::size_t first, std::size_t count) { return place.floats(first, count); };
  // One step with `peer`: sends window `out` of the data (if any), receives a window of
  // in.count floats into the data at `in` (into_data) or into the scratch's start.
  auto step = [&](std::uint64_t k, int peer, const Window* out, const Window* in, bool into_data) {
    std::vector<Request> recvs, sends;
    std::vector<std::size_t> expected;  // each receive's bytes
    CancelOnUnwind guard(transport_);
    guard.watch(recvs);
    guard.watch(sends);
    if (in != nullptr) {
      for_pieces(*in, [&](std::size_t a, std::size_t len, std::size_t c) {
        const ByteRange range = into_data ? in_data(in->first + a, len)
                                          : ByteRange{a * sizeof(float), len * sizeof(float)};
        recvs.push_back(transport_.recv(peer, layout.with(tag, k, c),
                                        into_data ? region : *scratch_.region, range));
        expected.push_back(range.size);
      });
    }
    if (out != nullptr) {
      for_pieces(*out, [&](std::size_t a, std::size_t len, std::size_t c) {
        sends.push_back(
            transport_.send(peer, layout.with(tag, k, c), region, in_data(out->first + a, len)));
      });
    }
    for (std::size_t r = 0; r < recvs.size(); ++r) {
      wait_for_piece(transport_, recvs[r], expected[r], options_.timeout,
                     "a halving-doubling allreduce receive");
    }
    for (auto& s : sends) {
      wait_or_lost(transport_, s, options_.timeout, "a halving-doubling allreduce send");
    }
  };

  const Window all{0, n};
  if (folds) {
    step(0, place.rank_at(i + 1), &all, nullptr, false);
    step(last_step, place.rank_at(i + 1), nullptr, &all, true);
    return;
  }
  if (i < 2 * q) {  // the odd one of a pair: its data plus its even partner's
    step(0, place.rank_at(i - 1), nullptr, &all, false);
    ops_.add(data, scratch_.floats.first(n));
  }
  std::vector<Window> above(levels);  // the window held before each halving level
  Window mine = all;
  for (std::uint64_t k = 0; k < levels; ++k) {
    const std::size_t mask = p >> (k + 1);
    const int partner = place.rank_at(index_of(v ^ mask));
    const Window lower{mine.first, mine.count / 2};
    const Window upper{mine.first + lower.count, mine.count - lower.count};
    const Window& keep = (v & mask) != 0 ? upper : lower;
    const Window& give = (v & mask) != 0 ? lower : upper;
    step(1 + k, partner, &give, &keep, false);
    ops_.add(data.subspan(keep.first, keep.count), scratch_.floats.first(keep.count));
    above[k] = mine;
    mine = keep;
  }
  if (op == ReduceOp::kAverage) {
    ops_.scale(data.subspan(mine.first, mine.count), 1.0f / static_cast<float>(N));
  }
  for (std::uint64_t k = levels; k-- > 0;) {
    const std::size_t mask = p >> (k + 1);
    const int partner = place.rank_at(index_of(v ^ mask));
    const Window parent = above[k];
    const Window theirs = mine.first == parent.first
                              ? Window{parent.first + mine.count, parent.count - mine.count}
                              : Window{parent.first, parent.count - mine.count};
    step(1 + levels + (levels - 1 - k), partner, &mine, &theirs, true);
    mine = parent;
  }
  if (i < 2 * q) step(last_step, place.rank_at(i - 1), &all, nullptr, false);
}

}  // namespace murmur::transport
