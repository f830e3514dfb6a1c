#include "membership/agreement.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "transport/collectives.h"
#include "transport/frame.h"
#include "transport/tag.h"

namespace murmur::membership {

std::int64_t agree(transport::Transport& transport, LiveSet& live, std::int64_t round) {
  const int n = live.world_size(), self = transport.rank();
  const std::uint64_t number = live.next_agreement();
  const transport::Tag tag = transport::TagLayout(transport).make(
      transport::purpose::kAgreement, static_cast<std::int64_t>(number));
  const std::size_t bytes = AgreementMessage::size(n);
  std::vector<int> peers;
  for (int r : live.live_ranks(round)) {
    if (r != self) peers.push_back(r);
  }
  AgreementMessage mine{round, std::vector<bool>(static_cast<std::size_t>(n), false)};
  for (int r : live.dead_ranks()) mine.dead[r] = true;
  std::vector<std::byte> out(bytes), in(bytes * std::max<std::size_t>(1, peers.size()));
  mine.encode(out);
  auto out_region = transport.register_region(out);
  auto in_region = transport.register_region(in);
  std::vector<transport::Request> recvs, sends;
  transport::CancelOnUnwind guard(transport);
  guard.watch(recvs);
  guard.watch(sends);
  for (std::size_t k = 0; k < peers.size(); ++k) {
    recvs.push_back(transport.recv(peers[k], tag, *in_region, {k * bytes, bytes}));
  }
  for (int r : peers) sends.push_back(transport.send(r, tag, *out_region, {0, bytes}));
  // The others enter this agreement when their own ring fails, which may take them up to a
  // peer timeout for the ring they were in plus one for the next: wait for that and more.
  const auto deadline = transport::deadline_after(4 * live.peer_timeout());
  std::int64_t highest = round;
  std::vector<int> accusers(static_cast<std::size_t>(n), 0);  // answers in that count a rank dead
  std::vector<bool> answered(peers.size(), false), settled(peers.size(), false);
  std::vector<std::vector<bool>> accuses(peers.size());  // per answer: the ranks it counts dead
  auto take = [&](std::size_t k) {
    AgreementMessage theirs;
    try {
      theirs = AgreementMessage::decode(std::span(in).subspan(k * bytes, bytes), n);
    } catch (const ProtocolError& e) {
      live.mark_dead(peers[k], fmt::format("sent a malformed agreement: {}", e.what()));
      return;
    }
    highest = std::max(highest, theirs.round);
    if (theirs.dead[self]) {
      live.mark_dead(peers[k], "it counts this rank as dead");
      return;  // not one of us: its view does not count
    }
    answered[k] = true;
    accuses[k] = theirs.dead;
    for (int r = 0; r < n; ++r) {
      if (theirs.dead[r] && r != self) ++accusers[r];
    }
  };
  // A rank is waited for no longer once most of the others we wait for count it dead. Not on
  // one word: a peer dropped as frozen and then continued counts its droppers dead, and they
  // are alive and on their way to this agreement.
  auto condemned = [&](int r) { return 2 * accusers[r] > static_cast<int>(peers.size()) - 1; };
  // Poll every answer at once: a silent rank that the answers already condemn is not waited
  // for any longer.
  for (;;) {
    bool pending = false;
    for (std::size_t k = 0; k < peers.size(); ++k) {
      if (settled[k]) continue;
      bool done = false;
      std::string failure;
      try {
        done = transport.test(recvs[k]);
        if (done && recvs[k].state()->bytes != bytes) {
          failure = fmt::format("an agreement message of {} bytes, expected {}",
                                recvs[k].state()->bytes, bytes);
        }
      } catch (const TransportError& e) {
        failure = e.what();
      }
      const bool late = transport::Clock::now() >= deadline ||
                        condemned(peers[k]);
      // A rank whose new process asks to rejoin answers no agreement: not waited for.
      const bool restarted = !done && failure.empty() && live.restarted(peers[k]);
      if (restarted) failure = "it was restarted, and asks to rejoin";
      if (done && failure.empty()) {
        settled[k] = true;
        take(k);  // answered[k] iff its view counts
      } else if (!failure.empty() || late) {
        settled[k] = true;
        if (!recvs[k].state()->done) transport.cancel(recvs[k]);
        live.mark_dead(peers[k], restarted ? failure
                                 : failure.empty()
                                     ? std::string("did not answer the agreement after a failed allreduce")
                                     : fmt::format("its answer to the agreement failed: {}", failure));
      } else {
        pending = true;
      }
    }
    if (!pending) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Accusations among those who answered: settle them by count, the most accused first.
  std::vector<std::size_t> standing;
  for (std::size_t k = 0; k < peers.size(); ++k) {
    if (answered[k]) standing.push_back(k);
  }
  for (;;) {
    std::size_t worst = 0;
    int most = 0;
    for (std::size_t j : standing) {
      int count = 0;
      for (std::size_t i : standing) count += accuses[i][peers[j]] ? 1 : 0;
      if (count > 0 && count >= most) {  // ascending ranks: a tie goes to the higher
        most = count;
        worst = j;
      }
    }
    if (most == 0) break;
    live.mark_dead(peers[worst], fmt::format("{} of the survivors that answered count it dead", most));
    std::erase(standing, worst);
  }
  // Whoever no answer shows alive but one that stands reports dead.
  for (int r = 0; r < n; ++r) {
    if (r == self) continue;
    bool accused = false;
    for (std::size_t i : standing) accused = accused || accuses[i][r];
    const bool stands = std::any_of(standing.begin(), standing.end(),
                                    [&](std::size_t k) { return peers[k] == r; });
    if (accused && !stands) live.mark_dead(r, "a survivor lost it");
  }
  for (auto& s : sends) {
    try {
      if (!transport.wait(s, transport::deadline_after(live.peer_timeout()))) transport.cancel(s);
    } catch (const TransportError&) {
    }
  }
  log().info("rank {}: agreement {}: live ranks {}", self, number,
             fmt::join(live.live_ranks(round), ","));
  return highest;
}

}  // namespace murmur::membership
