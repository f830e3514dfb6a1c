#include "membership/live_set.h"

#include <algorithm>

#include "core/logging.h"

namespace murmur::membership {

LiveSet::LiveSet(int world_size, int rank, std::chrono::milliseconds peer_timeout,
                 std::chrono::milliseconds message_timeout)
    : rank_(rank),
      peer_timeout_(peer_timeout),
      message_timeout_(std::max(peer_timeout, message_timeout)),
      alive_from_(world_size, kAlways) {}

bool LiveSet::alive(int r, std::int64_t step) const {
  if (r == rank_) return true;
  std::lock_guard lock(mu_);
  return step >= alive_from_.at(r);
}

bool LiveSet::dead(int r) const {
  std::lock_guard lock(mu_);
  return alive_from_.at(r) == kDead;
}

void LiveSet::mark_dead(int r, std::string_view why) {
  if (r == rank_ || r < 0 || r >= world_size()) return;
  {
    std::lock_guard lock(mu_);
    if (alive_from_[r] == kDead) return;
    alive_from_[r] = kDead;
    ++version_;
  }
  log().warn("rank {}: lost rank {} ({}); dropping it from the mixing weights and going on "
             "(run.on_peer_failure: continue)", rank_, r, why);
  if (on_dead_) on_dead_(r);
}

void LiveSet::revive(int r, std::int64_t from_step) {
  if (r == rank_) return;
  {
    std::lock_guard lock(mu_);
    alive_from_.at(r) = from_step;
    ++version_;
  }
  log().info("rank {}: rank {} rejoins from step {}", rank_, r, from_step);
}

void LiveSet::rejoined_from(std::int64_t step) {
  std::lock_guard lock(mu_);
  rejoined_from_ = step;
  ++version_;
}

bool LiveSet::joins_at(std::int64_t step) const {
  std::lock_guard lock(mu_);
  if (rejoined_from_ == step) return true;
  for (int r = 0; r < static_cast<int>(alive_from_.size()); ++r) {
    if (r != rank_ && alive_from_[r] == step) return true;
  }
  return false;
}

bool LiveSet::rejoins_at(std::int64_t step) const {
  std::lock_guard lock(mu_);
  return rejoined_from_ == step;
}

std::vector<int> LiveSet::live_ranks(std::int64_t step) const {
  std::vector<int> out;
  std::lock_guard lock(mu_);
  for (int r = 0; r < static_cast<int>(alive_from_.size()); ++r) {
    if (r == rank_ || step >= alive_from_[r]) out.push_back(r);
  }
  return out;
}

std::vector<int> LiveSet::dead_ranks() const {
  std::vector<int> out;
  std::lock_guard lock(mu_);
  for (int r = 0; r < static_cast<int>(alive_from_.size()); ++r) {
    if (alive_from_[r] == kDead) out.push_back(r);
  }
  return out;
}

std::uint64_t LiveSet::version() const {
  std::lock_guard lock(mu_);
  return version_;
}

std::uint64_t LiveSet::agreements() const {
  std::lock_guard lock(mu_);
  return agreements_;
}

void LiveSet::adopt_agreements(std::uint64_t count) {
  std::lock_guard lock(mu_);
  agreements_ = std::max(agreements_, count);
}

std::uint64_t LiveSet::next_agreement() {
  std::lock_guard lock(mu_);
  return agreements_++;
}

}  // namespace murmur::membership
