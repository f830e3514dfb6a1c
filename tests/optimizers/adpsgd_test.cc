// Asynchronous AD-PSGD (optimizers/adpsgd.h) over inproc threads: the active/passive split, the
// wire checks, atomic exchanges under concurrent requests (the final models are exactly the
// replay of the exchanges both sides logged), the sum kept through local steps, refusals of
// malformed and replayed requests, and the staleness each side counts.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <thread>

#include "core/rng.h"
#include "optimizers/adpsgd_wire.h"
#include "optimizers/algorithm.h"
#include "tests/optimizers/consensus_util.h"
#include "tests/transport/backends.h"
#include "topology/graph.h"
#include "topology/spectral.h"
#include "transport/tag.h"

namespace murmur::optimizers::testing {
namespace {

namespace tt = transport::testing;
namespace wire = adpsgd_wire;

topology::Graph graph_of(const std::string& name, int n) {
  return topology::static_graph(graph(name), n);
}

TEST_CASE("adpsgd: actives and passives split the graph's edges", "[adpsgd]") {
  SECTION("a ring of 8 is bipartite: even ranks ask, odd ones answer, every edge used") {
    const auto r = wire::split_roles(graph_of("ring", 8));
    CHECK(r.dropped_edges == 0);
    for (int i = 0; i < 8; ++i) {
      CHECK(r.active[i] == (i % 2 == 0));
      CHECK(r.partners[i] == std::vector<int>{std::min((i + 7) % 8, (i + 1) % 8), std::max((i + 7) % 8, (i + 1) % 8)});
    }
  }
  SECTION("a hypercube splits by the parity of the bits set") {
    const auto r = wire::split_roles(graph_of("hypercube", 8));
    CHECK(r.dropped_edges == 0);
    for (int i = 0; i < 8; ++i) CHECK(r.active[i] == (__builtin_popcount(i) % 2 == 0));
  }
  SECTION("graphs that are not bipartite lose their edges within a colour, and stay connected") {
    for (const auto& [name, n, dropped] : {std::tuple{"ring", 5, 1}, std::tuple{"complete", 8, 12},
                                           std::tuple{"exponential", 8, 12}}) {
      CAPTURE(name, n);
      const auto r = wire::split_roles(graph_of(name, n));
      CHECK(r.dropped_edges == dropped);
      int actives = 0;
      for (int i = 0; i < n; ++i) {
        actives += r.active[i];
        REQUIRE(!r.partners[i].empty());
        for (int j : r.partners[i]) CHECK(r.active[j] != r.active[i]);
      }
      CHECK(actives == (n + 1) / 2);  // even ranks against odd ones
    }
  }
}

TEST_CASE("adpsgd: a message is checked before a byte of its model is used", "[adpsgd]") {
  const std::size_t floats = 100;
  std::vector<float> msg(wire::kHeaderFloats + floats);
  for (std::size_t i = 0; i < floats; ++i) msg[wire::kHeaderFloats + i] = 0.5f * static_cast<float>(i);
  const auto bytes = std::as_writable_bytes(std::span(msg));
  const auto model = std::span<const float>(msg).subspan(wire::kHeaderFloats);
  wire::seal(bytes, {wire::Kind::kRequest, 2, 0, 7, 1234}, model);
  const wire::Expect ok{2, 7, floats, false};
  std::string why;
  auto h = wire::check(bytes, bytes.size(), ok, why);
  REQUIRE(h);
  CHECK(h->step == 1234);
  CHECK(h->kind == wire::Kind::kRequest);

  auto refused = [&](std::size_t got, wire::Expect e) {
    why.clear();
    CHECK(!wire::check(bytes, got, e, why));
    return why;
  };
  CHECK_THAT(refused(bytes.size(), {3, 7, floats, false}), Catch::Contains("says it is from rank 2"));
  CHECK_THAT(refused(bytes.size(), {2, 8, floats, false}), Catch::Contains("numbered 7 where 8 was due"));
  CHECK_THAT(refused(bytes.size(), {2, 7, floats, true}), Catch::Contains("where a reply was due"));
  CHECK_THAT(refused(bytes.size() - 4, ok), Catch::Contains("expected 432"));
  CHECK_THAT(refused(10, ok), Catch::Contains("shorter than its 32-byte header"));
  msg[wire::kHeaderFloats + 17] = 99;  // one float changed on the way
  CHECK_THAT(refused(bytes.size(), ok), Catch::Contains("fails its CRC32C"));
  msg[0] = 0;
  CHECK_THAT(refused(bytes.size(), ok), Catch::Contains("without adpsgd's magic"));
  // A goodbye is a header alone.
  wire::seal(bytes, {wire::Kind::kBye, 2, 0, 7, 5}, {});
  h = wire::check(bytes, wire::kHeaderBytes, ok, why);
  REQUIRE(h);
  CHECK(h->kind == wire::Kind::kBye);
}

struct PeerEnd {
  std::vector<float> params;
  ExchangeReport report;
};

// Each rank's initial vector (consensus_util's initial_vector), or with its mean over the ranks
// taken away: consensus then drives every value towards zero, and float32 keeps its relative
// precision all the way (with a nonzero mean, the disagreement stops at 1e-7 of the mean).
std::vector<std::vector<float>> initial_floats(std::uint64_t seed, int n, std::size_t dim, bool centered) {
  std::vector<std::vector<float>> x(n);
  for (int r = 0; r < n; ++r) x[r] = initial_vector(seed, r, dim);
  for (std::size_t i = 0; centered && i < dim; ++i) {
    double mean = 0;
    for (int r = 0; r < n; ++r) mean += x[r][i] / n;
    for (int r = 0; r < n; ++r) x[r][i] = static_cast<float>(x[r][i] - mean);
  }
  return x;
}

struct AsyncRun {
  int ranks = 8;
  std::uint64_t seed = 7;  // the initial vectors, the partner draws and the pauses
  bool centered = false;   // each entry's initial values summing to zero over the ranks
  std::string graph = "ring";
  std::size_t dim = 64;
  std::function<int(int rank)> steps;
  // Slept before each step of `rank` (random pauses: actives race one another to the passives).
  std::function<std::chrono::microseconds(int rank, Rng&)> pause;
  std::function<void(int rank, std::vector<float>&)> update;  // a local step, if any
};

// The ranks of `run`, each taking its steps (pause, update, after_step), then finish().
// Returns each rank's end.
std::vector<PeerEnd> run_async(const AsyncRun& run, std::string& failures) {
  std::vector<PeerEnd> ends(run.ranks);
  std::mutex mu;
  auto results = tt::run_ranks("inproc", run.ranks, [&](tt::RankContext& ctx) {
    const int r = ctx.rank();
    std::vector<float> params = initial_floats(run.seed, run.ranks, run.dim, run.centered)[r];
    TransportConfig tc;
    tc.recv_timeout_ms = 20000;
    auto built = build_averaging(ctx.transport(), device::cpu(), algorithm("adpsgd"),
                                 graph(run.graph), tc, params, run.seed);
    Rng rng = Rng(run.seed + 4).fork(static_cast<std::uint64_t>(r));
    for (int t = 1; t <= run.steps(r); ++t) {
      std::this_thread::sleep_for(run.pause(r, rng));
      if (run.update) run.update(r, params);
      built.averaging->after_step(t);
    }
    built.averaging->finish();
    const auto report = built.averaging->exchange_report();
    MURMUR_CHECK(report.has_value());
    std::lock_guard lock(mu);
    ends[r] = {params, *report};
  });
  failures = tt::failures(results);
  return ends;
}

// The exchanges of a run as (active, passive) pairs, in an order both sides' logs agree with
// (each side's exchanges in the order it made them): the order in which they can be replayed.
// Shorter than the exchanges made if the logs admit no such order (a cycle).
std::vector<std::pair<int, int>> replay_order(const std::vector<PeerEnd>& ends) {
  const int n = static_cast<int>(ends.size());
  std::vector<std::pair<int, int>> order;
  std::vector<std::size_t> next(n, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int a = 0; a < n; ++a) {
      if (!ends[a].report.initiator || next[a] >= ends[a].report.trace.size()) continue;
      const auto& e = ends[a].report.trace[next[a]];
      const int p = e.partner;
      const auto& theirs = ends[p].report.trace;
      if (next[p] >= theirs.size() || theirs[next[p]].partner != a || theirs[next[p]].sequence != e.sequence) {
        continue;  // the passive serves another active first
      }
      order.emplace_back(a, p);
      ++next[a];
      ++next[p];
      progress = true;
    }
  }
  return order;
}

// Each rank's initial vector (initial_floats), in double.
std::vector<std::vector<double>> initial_vectors(std::uint64_t seed, int n, std::size_t dim,
                                                 bool centered = false) {
  std::vector<std::vector<double>> x(n);
  const auto f = initial_floats(seed, n, dim, centered);
  for (int r = 0; r < n; ++r) x[r].assign(f[r].begin(), f[r].end());
  return x;
}

// Steps paced by a uniform random pause of up to `us` microseconds.
std::function<std::chrono::microseconds(int, Rng&)> up_to(int us) {
  return [us](int, Rng& rng) { return std::chrono::microseconds(rng.below(us + 1)); };
}

TEST_CASE("adpsgd: exchanges are atomic under concurrent requests", "[adpsgd]") {
  // The complete graph of 8: 4 actives ask 4 passives each, at random moments, so requests
  // from several actives reach a passive at once while its training thread publishes. If each
  // exchange is atomic, the final models are exactly what the exchanges give applied one at a
  // time in an order both sides agree on: the replay below, in double, from the initial
  // vectors and the two sides' logs. A half-written exchange (two averaged into one stale copy,
  // an average lost to a publish) leaves a peer off by the order of the spread, 1e-1.
  const int n = 8;
  const std::size_t dim = 64;
  std::string failures;
  const auto ends =
      run_async({.ranks = n, .graph = "complete", .dim = dim, .steps = [](int) { return 300; },
                 .pause = up_to(400)},
                failures);
  INFO(failures);
  REQUIRE(failures.empty());

  // Each exchange, as each side saw it: the active's (passive, sequence) is the passive's
  // (active, sequence), with the steps the other way round.
  std::map<std::tuple<int, int, std::uint64_t>, int> seen;  // (active, passive, seq) -> sides
  std::uint64_t made = 0;
  for (int r = 0; r < n; ++r) {
    const auto& rep = ends[r].report;
    REQUIRE(rep.trace.size() == rep.exchanges);
    CHECK(rep.lost == 0);
    CHECK(rep.refused == 0);
    if (rep.initiator) made += rep.exchanges;
    for (const auto& e : rep.trace) {
      const auto key = rep.initiator ? std::tuple{r, e.partner, e.sequence}
                                     : std::tuple{e.partner, r, e.sequence};
      ++seen[key];
    }
  }
  INFO("exchanges made: " << made);
  CHECK(made > 200);  // with 300 steps each, most steps of the 4 actives averaged
  for (const auto& [key, sides] : seen) CHECK(sides == 2);

  auto x = initial_vectors(7, n, dim);
  const auto order = replay_order(ends);
  for (const auto& [a, p] : order) {
    for (std::size_t i = 0; i < dim; ++i) x[a][i] = x[p][i] = 0.5 * (x[a][i] + x[p][i]);
  }
  const std::uint64_t replayed = order.size();
  CHECK(replayed == made);  // no cycle: the two sides' orders agree
  double worst = 0, spread = 0;
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < dim; ++i) {
      worst = std::max(worst, std::fabs(ends[r].params[i] - x[r][i]));
      spread = std::max(spread, std::fabs(x[r][i] - x[0][i]));
    }
  }
  INFO(fmt::format("largest difference from the replay {:.3g}; spread left {:.3g}", worst, spread));
  CHECK(worst < 1e-4);
  CHECK(spread < 0.5);  // it did average (the initial spread is about 6)
}

// ||x - mean x|| over every rank and entry.
double disagreement(const std::vector<std::vector<double>>& x) {
  double d = 0;
  for (std::size_t i = 0; i < x[0].size(); ++i) {
    double mean = 0;
    for (const auto& xr : x) mean += xr[i] / static_cast<double>(x.size());
    for (const auto& xr : x) d += (xr[i] - mean) * (xr[i] - mean);
  }
  return std::sqrt(d);
}

TEST_CASE("adpsgd: consensus contracts per exchange as pairwise gossip's theory says", "[adpsgd]") {
  // Randomized gossip (Boyd et al. 2006): an exchange replaces x_a and x_p by their mean, p drawn
  // uniformly from a's neighbors (here the passive neighbors of the active a, split_roles). What
  // one exchange contracts ||x - mean|| by, in expectation over the draws, depends on who starts
  // the exchanges in what order: it is computed here for the run's own order (replay_order),
  // by replaying it in double with fresh partner draws, 400 times (the expectation of the log,
  // the quantity a single run measures). One run of some 400 exchanges strays up to 15% from it,
  // so 30 runs are averaged (under 2% standard error); their mean must be within 10% of the
  // theory's.
  // (Boyd's closed form, 1/2 log lambda_2(E[W]) per exchange, bounds it only where the actives
  // take turns uniformly at random; a run whose actives end at different times mixes slower. It
  // is printed beside, not checked.)
  const int n = 8, runs = 30, draws = 400;
  const std::size_t dim = 16;
  const auto roles = adpsgd_wire::split_roles(graph_of("ring", n));
  double measured = 0, theory = 0;
  std::uint64_t total = 0;
  for (int k = 0; k < runs; ++k) {
    const std::uint64_t seed = 100 + static_cast<std::uint64_t>(k);
    std::string failures;
    // 150 steps of each active: 200 to 600 exchanges, as the machine's load allows.
    const auto ends = run_async({.ranks = n, .seed = seed, .centered = true, .dim = dim,
                                 .steps = [](int) { return 150; }, .pause = up_to(400)},
                                failures);
    INFO(failures);
    REQUIRE(failures.empty());
    const auto order = replay_order(ends);
    std::uint64_t made = 0;
    std::vector<std::vector<double>> end(n);
    for (int r = 0; r < n; ++r) {
      if (ends[r].report.initiator) made += ends[r].report.exchanges;
      end[r].assign(ends[r].params.begin(), ends[r].params.end());
    }
    REQUIRE(order.size() == made);
    REQUIRE(made >= 100);
    const auto x0 = initial_vectors(seed, n, dim, /*centered=*/true);
    const double start = disagreement(x0);
    const double mine = std::log(disagreement(end) / start) / static_cast<double>(made);
    Rng rng(seed * 31);
    double expect = 0;
    for (int d = 0; d < draws; ++d) {
      auto x = x0;
      for (const auto& [a, ignored] : order) {
        const auto& passives = roles.partners[a];
        const int p = passives[rng.below(passives.size())];
        for (std::size_t i = 0; i < dim; ++i) x[a][i] = x[p][i] = 0.5 * (x[a][i] + x[p][i]);
      }
      expect += std::log(disagreement(x) / start) / static_cast<double>(made);
    }
    UNSCOPED_INFO(fmt::format("run {}: {} exchanges, log contraction {:.4f} per exchange, theory {:.4f}",
                              k, made, mine, expect / draws));
    measured += mine / runs;
    theory += expect / draws / runs;
    total += made;
  }
  // E[W] of one exchange whose active is drawn uniformly, then its passive.
  topology::MixingMatrix ew{n, std::vector<double>(static_cast<std::size_t>(n * n), 0.0)};
  int actives = 0;
  for (int a = 0; a < n; ++a) actives += roles.active[a];
  for (int a = 0; a < n; ++a) {
    if (!roles.active[a]) continue;
    for (int p : roles.partners[a]) {
      const double w = 1.0 / actives / static_cast<double>(roles.partners[a].size());
      for (int i = 0; i < n; ++i) ew.at(i, i) += (i == a || i == p) ? 0.5 * w : w;
      ew.at(a, p) += 0.5 * w;
      ew.at(p, a) += 0.5 * w;
    }
  }
  const double bound = 0.5 * std::log(topology::analyze(ew).second_eigenvalue);
  INFO(fmt::format("{} runs, {} exchanges: log contraction {:.4f} per exchange, theory {:.4f}, "
                   "Boyd's bound {:.4f}", runs, total, measured, theory, bound));
  CHECK(std::fabs(measured - theory) <= 0.1 * std::fabs(theory));
}

TEST_CASE("adpsgd: the sum of local updates is kept while peers step at their own pace", "[adpsgd]") {
  // Local steps land between the exchanges of both sides (an active's while its request is in
  // flight, a passive's while its responder averages a published copy): the mean over peers
  // moves by the mean of the updates and nothing else.
  const int n = 6, steps = 200;
  const std::size_t dim = 32;
  std::vector<double> expect(dim, 0.0);
  for (int r = 0; r < n; ++r) {
    const auto x = initial_vector(7, r, dim);
    for (std::size_t i = 0; i < dim; ++i) expect[i] += (x[i] + steps * (r + 1) * 0.001 * (i % 3)) / n;
  }
  std::string failures;
  const auto ends = run_async(
      {.ranks = n, .graph = "ring", .dim = dim, .steps = [](int) { return steps; },
       .pause = up_to(300),
       .update = [](int r, std::vector<float>& p) {
         for (std::size_t i = 0; i < p.size(); ++i) p[i] += (r + 1) * 0.001f * static_cast<float>(i % 3);
       }},
      failures);
  INFO(failures);
  REQUIRE(failures.empty());
  double worst = 0;
  for (std::size_t i = 0; i < dim; ++i) {
    double mean = 0;
    for (int r = 0; r < n; ++r) mean += ends[r].params[i] / n;
    worst = std::max(worst, std::fabs(mean - expect[i]));
  }
  CHECK(worst < 1e-4);
  std::uint64_t made = 0;
  for (const auto& e : ends) made += e.report.initiator ? e.report.exchanges : 0;
  CHECK(made > 100);
}

TEST_CASE("adpsgd: staleness counts how many steps apart the partners were", "[adpsgd]") {
  // Rank 1 (a passive of the ring) steps 8 times slower than the rest: its actives, 0 and 2,
  // find it far behind, and the histogram says so; between the others it stays small.
  const int steps = 160;
  std::string failures;
  const auto ends = run_async(
      {.ranks = 4, .graph = "ring", .dim = 16,
       .steps = [](int r) { return r == 1 ? steps / 8 : steps; },
       .pause = [](int r, Rng&) { return std::chrono::microseconds(r == 1 ? 4000 : 500); }},
      failures);
  INFO(failures);
  REQUIRE(failures.empty());
  const auto& slow = ends[1].report;
  CHECK(!slow.initiator);
  std::uint64_t far = 0, total = 0;
  for (std::size_t a = 0; a < slow.staleness.size(); ++a) {
    total += slow.staleness[a];
    if (a >= 16) far += slow.staleness[a];
  }
  INFO(fmt::format("rank 1: {} exchanges, {} of them 16 or more steps apart", total, far));
  CHECK(total == slow.exchanges);
  CHECK(far > total / 2);
  // Every exchange is in both sides' histograms: the actives' hold rank 1's and rank 3's.
  std::uint64_t both = 0;
  for (int r : {0, 2}) both += ends[r].report.exchanges;
  CHECK(both == ends[1].report.exchanges + ends[3].report.exchanges);
}

TEST_CASE("adpsgd: a malformed or replayed request is refused and counted, and the run goes on",
          "[adpsgd]") {
  // Rank 0 (an active of a ring of 4) speaks the protocol by hand: a request numbered 5 where 0
  // is due (a replay from long past), then one with a corrupted model, then goodbyes. Rank 1
  // refuses both, counting them, and keeps its model; rank 2 and 3 run adpsgd as usual.
  const int n = 4;
  const std::size_t dim = 50;
  std::vector<PeerEnd> ends(n);
  std::mutex mu;
  auto results = tt::run_ranks("inproc", n, [&](tt::RankContext& ctx) {
    auto& t = ctx.transport();
    std::vector<float> params = initial_vector(7, ctx.rank(), dim);
    if (ctx.rank() == 0) {
      const transport::TagLayout layout(t);
      const unsigned purpose = purpose_of(find_algorithm("adpsgd"));
      std::vector<float> out(wire::kHeaderFloats + dim), in(wire::kHeaderFloats + dim);
      auto out_region = t.register_region(std::as_writable_bytes(std::span(out)));
      auto in_region = t.register_region(std::as_writable_bytes(std::span(in)));
      auto ask = [&](std::uint64_t tag_seq, std::uint64_t said_seq, bool corrupt) {
        std::copy(params.begin(), params.end(), out.begin() + wire::kHeaderFloats);
        wire::seal(std::as_writable_bytes(std::span(out)), {wire::Kind::kRequest, 0, 0, said_seq, 1},
                   std::span<const float>(out).subspan(wire::kHeaderFloats));
        if (corrupt) out.back() += 1;
        auto recv = t.recv(1, layout.make(purpose, tag_seq, 1), *in_region, {0, in.size() * 4});
        auto send = t.send(1, layout.make(purpose, tag_seq, 0), *out_region, {0, out.size() * 4});
        MURMUR_CHECK(t.wait(send, transport::deadline_after(std::chrono::seconds(20))));
        MURMUR_CHECK(t.wait(recv, transport::deadline_after(std::chrono::seconds(20))));
        std::string why;
        const auto h = wire::check(std::as_bytes(std::span(in)), recv.state()->bytes,
                                   {1, tag_seq, dim, true}, why);
        MURMUR_CHECK(h && h->kind == wire::Kind::kRefused);
      };
      ask(0, 5, false);
      ask(1, 1, true);
      for (const auto& [peer, seq] : {std::pair{1, 2ull}, std::pair{3, 0ull}}) {
        wire::seal(std::as_writable_bytes(std::span(out)), {wire::Kind::kBye, 0, 0, seq, 1}, {});
        auto send = t.send(peer, layout.make(purpose, seq, 0), *out_region, {0, wire::kHeaderBytes});
        MURMUR_CHECK(t.wait(send, transport::deadline_after(std::chrono::seconds(20))));
      }
      return;
    }
    TransportConfig tc;
    tc.recv_timeout_ms = 20000;
    auto built = build_averaging(t, device::cpu(), algorithm("adpsgd"), graph("ring"), tc, params, 7);
    for (int step = 1; step <= 50; ++step) {
      std::this_thread::sleep_for(std::chrono::microseconds(300));
      built.averaging->after_step(step);
    }
    built.averaging->finish();
    std::lock_guard lock(mu);
    ends[ctx.rank()] = {params, *built.averaging->exchange_report()};
  });
  INFO(tt::failures(results));
  REQUIRE(tt::failures(results).empty());
  CHECK(ends[1].report.refused == 2);
  CHECK(ends[3].report.refused == 0);
  CHECK(ends[2].report.exchanges > 0);  // rank 2 averaged with 1 and 3 meanwhile
  CHECK(ends[2].report.exchanges == ends[1].report.exchanges + ends[3].report.exchanges);
}

}  // namespace
}  // namespace murmur::optimizers::testing
