// Which ranks this peer believes alive, shared by the live Neighborhood (neighborhood.h), the
// runtime's final average and the rejoin protocol (run.on_peer_failure=continue). A rank is
// marked dead when its connection fails or it stays silent past transport.peer_timeout_ms
// (silent: on tcp, not even a heartbeat arrives, so a live peer that is slow to send its message
// is waited for, up to transport.recv_timeout_ms; on the other backends, its message does not
// arrive). A rank that rejoins is alive again from an agreed step on. Thread-safe (the
// communication thread marks deaths while the training thread reads); mu_ is a leaf lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <string_view>
#include <vector>

namespace murmur::membership {

class LiveSet {
 public:
  // `message_timeout` (transport.recv_timeout_ms; at least peer_timeout): how long a message
  // from a peer that is heard (heartbeats) but does not send it is waited for.
  LiveSet(int world_size, int rank, std::chrono::milliseconds peer_timeout,
          std::chrono::milliseconds message_timeout = std::chrono::milliseconds(0));

  int world_size() const { return static_cast<int>(alive_from_.size()); }
  int rank() const { return rank_; }
  // How long a neighbor may stay silent before it is declared dead.
  std::chrono::milliseconds peer_timeout() const { return peer_timeout_; }
  std::chrono::milliseconds message_timeout() const { return message_timeout_; }
  // Called (outside the lock) with each rank mark_dead takes out, once: the runtime drops the
  // connection (Transport::drop), so that the dead rank, if it lives after all, learns it at
  // once instead of waiting on a rank that no longer talks to it. Set before use.
  void on_dead(std::function<void(int)> hook) { on_dead_ = std::move(hook); }
  // Asked (outside the lock) by restarted(): true iff rank r's process was replaced by a new one
  // that asks to rejoin (the rejoin responder knows). Unset: never.
  void restart_probe(std::function<bool(int)> probe) { restart_probe_ = std::move(probe); }
  // True iff `r` is known to have been restarted: the old process is dead, and the new one
  // takes part in nothing until it has rejoined. Called by the thread that drives the transport.
  bool restarted(int r) const { return restart_probe_ && restart_probe_(r); }

  // True iff `r` takes part in the averaging of `step` (this rank always does).
  bool alive(int r, std::int64_t step) const;
  // True iff `r` was marked dead and has not been taken back (revive() may be pending).
  bool dead(int r) const;
  // Marks `r` dead (idempotent) and logs a warning naming it and `why`, once.
  void mark_dead(int r, std::string_view why);
  // Takes `r` back from `step` on (the step both sides agreed on); logs it.
  void revive(int r, std::int64_t from_step);
  // This rank, restarted, takes part with the others again from `step` on (the agreed join step
  // of membership/rejoin.h): at that step it brings no state of its own beyond the averaged data.
  void rejoined_from(std::int64_t step);
  // True iff a rank takes part again from exactly `step`: this one (rejoined_from) or one
  // revived from it. The same on every rank of that step's average when the join was agreed.
  bool joins_at(std::int64_t step) const;
  // True iff this rank is one that takes part again from exactly `step`.
  bool rejoins_at(std::int64_t step) const;
  // The ranks alive at `step`, this one included, ascending.
  std::vector<int> live_ranks(std::int64_t step) const;
  std::vector<int> dead_ranks() const;
  // Bumped by every mark_dead/revive, so a caller can tell that the set changed.
  std::uint64_t version() const;
  // Agreements (live_allreduce.h) taken so far by this process, whichever allreduce took them:
  // the n-th agreement of every survivor meets the n-th of the others.
  std::uint64_t agreements() const;
  std::uint64_t next_agreement();
  // A restarted rank takes the count of the ranks it rejoins (never lowers it), so that its next
  // ring and agreement carry the same numbers as theirs.
  void adopt_agreements(std::uint64_t count);

 private:
  static constexpr std::int64_t kDead = std::numeric_limits<std::int64_t>::max();
  static constexpr std::int64_t kAlways = std::numeric_limits<std::int64_t>::min();
  int rank_;
  std::chrono::milliseconds peer_timeout_;
  std::chrono::milliseconds message_timeout_;
  std::function<void(int)> on_dead_;
  std::function<bool(int)> restart_probe_;
  mutable std::mutex mu_;                // guards every member below (leaf)
  std::vector<std::int64_t> alive_from_;  // per rank: first step it averages in; kDead if dead
  std::int64_t rejoined_from_ = kAlways;  // this rank's agreed join step, if it rejoined
  std::uint64_t version_ = 0;
  std::uint64_t agreements_ = 0;
};

}  // namespace murmur::membership
