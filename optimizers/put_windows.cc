#include "optimizers/put_windows.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/crc32c.h"
#include "core/error.h"
#include "optimizers/device_arrays.h"
#include "topology/mixing.h"
#include "topology/schedule.h"
#include "transport/frame.h"

namespace murmur::optimizers {

namespace {

using transport::load_le;
using transport::store_le;

// The small messages, little-endian. Notice: magic, CRC32C of the message, round, bytes. Ack:
// magic, 0, round. Keys: magic, CRC32C of what follows, our area's offset, the key's length,
// the key.
constexpr std::uint32_t kNoticeMagic = 0x5455504d;  // "MPUT"
constexpr std::uint32_t kAckMagic = 0x4b43414d;     // "MACK"
constexpr std::uint32_t kKeyMagic = 0x59454b4d;     // "MKEY"
constexpr std::size_t kNoticeBytes = 24;
constexpr std::size_t kAckBytes = 16;
constexpr std::size_t kSmallStride = 64;            // one notice and one ack per (peer, slot)
constexpr std::size_t kKeyHeader = 24;
constexpr std::size_t kMaxKeyBytes = 4096;          // a ucx rkey of every transport is < 1 KiB
// The chunk field of the tags: the two-sided path's messages use chunk 0.
constexpr std::uint64_t kNoticeChunk = 1, kAckChunk = 2, kKeyChunk = 3;

}  // namespace

void schedule_neighbors(const TopologyConfig& topology, int n, int rank, std::uint64_t seed,
                        std::vector<int>& sources, std::vector<int>& targets) {
  sources.clear();
  targets.clear();
  const int rounds = topology::is_time_varying(topology) ? topology::period(topology, n) : 1;
  if (rounds <= 0) {  // no period (random graphs): anyone may be a neighbor some round
    for (int r = 0; r < n; ++r) {
      if (r != rank) sources.push_back(r), targets.push_back(r);
    }
    return;
  }
  for (int t = 0; t < rounds; ++t) {
    const topology::RankMixing m = topology::rank_mixing(topology, n, rank, seed, t);
    sources.insert(sources.end(), m.recv_from.begin(), m.recv_from.end());
    targets.insert(targets.end(), m.send_to.begin(), m.send_to.end());
  }
  for (auto* v : {&sources, &targets}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
    std::erase(*v, rank);
  }
}

PutWindows::PutWindows(membership::Neighborhood& hood, device::Device& device, std::size_t floats,
                       int slots, std::vector<int> sources, std::vector<int> targets,
                       unsigned purpose)
    : hood_(hood),
      transport_(hood.transport()),
      device_(device),
      floats_(floats),
      stride_((floats + 63) / 64 * 64),
      slots_(static_cast<std::size_t>(slots)),
      layout_(transport_),
      purpose_(purpose) {
  if (!transport_.supports_put()) {
    throw ConfigError(fmt::format(
        "algorithm.one_sided: the {} backend has no one-sided put (ucx has, and ofi with a "
        "provider that offers FI_RMA)", transport_.name()));
  }
  if (!device_.host_memory()) {
    throw ConfigError(fmt::format("algorithm.one_sided: host memory only, not {}",
                                  device_.describe()));
  }
  if (!std::is_sorted(sources.begin(), sources.end()) ||
      !std::is_sorted(targets.begin(), targets.end())) {
    throw Error("PutWindows: sources and targets must be ascending");
  }
  for (int r : targets) {
    Out o;
    o.peer = r;
    o.slots.resize(slots_);
    outs_.push_back(std::move(o));
  }
  for (int r : sources) {
    In in;
    in.peer = r;
    in.slots.resize(slots_);
    ins_.push_back(std::move(in));
  }
  window_ = device_.zeros(std::max<std::size_t>(1, ins_.size() * slots_ * stride_));
  window_region_ = register_array(transport_, device_, window_.span());
  small_.assign(std::max<std::size_t>(1, (outs_.size() + ins_.size()) * slots_) * kSmallStride +
                    kKeyHeader + kMaxKeyBytes,
                std::byte{0});
  small_region_ = transport_.register_region(small_);
  exchange_keys();
}

PutWindows::~PutWindows() {
  // Posted receives point into our memory: give them up before it goes.
  auto drop = [&](transport::Request& q) {
    if (q.valid() && !q.state()->done) transport_.cancel(q);
  };
  for (auto& o : outs_) {
    for (auto& s : o.slots) drop(s.put), drop(s.notice), drop(s.ack);
  }
  for (auto& in : ins_) {
    for (auto& s : in.slots) drop(s.notice), drop(s.ack);
  }
}

std::size_t PutWindows::window_bytes() const { return ins_.size() * slots_ * stride_ * sizeof(float); }

transport::ByteRange PutWindows::out_notice(std::size_t i, std::size_t s) const {
  return {(i * slots_ + s) * kSmallStride, kNoticeBytes};
}
transport::ByteRange PutWindows::out_ack(std::size_t i, std::size_t s) const {
  return {(i * slots_ + s) * kSmallStride + 32, kAckBytes};
}
transport::ByteRange PutWindows::in_notice(std::size_t j, std::size_t s) const {
  return {((outs_.size() + j) * slots_ + s) * kSmallStride, kNoticeBytes};
}
transport::ByteRange PutWindows::in_ack(std::size_t j, std::size_t s) const {
  return {((outs_.size() + j) * slots_ + s) * kSmallStride + 32, kAckBytes};
}

void PutWindows::exchange_keys() {
  // To each source: our window's key and the offset of its area. From each target: theirs.
  // One small buffer per message, kept until every send has left.
  const std::vector<std::byte> key = window_region_->remote_key();
  if (key.empty() || key.size() > kMaxKeyBytes) {
    throw TransportError(fmt::format("{}: a window key of {} bytes", transport_.name(), key.size()));
  }
  const transport::Tag tag = layout_.make(purpose_, 0, 0, kKeyChunk);
  std::vector<std::vector<std::byte>> bodies;
  std::vector<std::unique_ptr<transport::Region>> regions;
  std::vector<transport::Request> sends;
  for (std::size_t j = 0; j < ins_.size(); ++j) {
    std::vector<std::byte>& b = bodies.emplace_back(kKeyHeader + key.size());
    store_le<std::uint32_t>(b.data(), kKeyMagic);
    store_le<std::uint64_t>(b.data() + 8, j * slots_ * stride_ * sizeof(float));
    store_le<std::uint64_t>(b.data() + 16, key.size());
    std::copy(key.begin(), key.end(), b.begin() + kKeyHeader);
    store_le<std::uint32_t>(b.data() + 4, crc32c(std::span(b).subspan(8)));
  }
  for (std::size_t j = 0; j < ins_.size(); ++j) {
    regions.push_back(transport_.register_region(bodies[j]));
    sends.push_back(transport_.send(ins_[j].peer, tag, *regions.back(), {0, bodies[j].size()}));
  }
  // One receive at a time into the tail of small_: keys are few and small.
  const transport::ByteRange into{small_.size() - kKeyHeader - kMaxKeyBytes, kKeyHeader + kMaxKeyBytes};
  for (Out& o : outs_) {
    transport::Request q = transport_.recv(o.peer, tag, *small_region_, into);
    if (!hood_.wait(q, "a one-sided window's key")) {
      o.lost = true;
      continue;
    }
    const std::byte* b = small_.data() + into.offset;
    const std::size_t got = q.state()->bytes;
    const std::uint64_t length = got >= kKeyHeader ? load_le<std::uint64_t>(b + 16) : 0;
    std::string fault;
    if (got < kKeyHeader) {
      fault = fmt::format("{} bytes, under the {}-byte header", got, kKeyHeader);
    } else if (load_le<std::uint32_t>(b) != kKeyMagic) {
      fault = "bad magic";
    } else if (length == 0 || length != got - kKeyHeader) {
      fault = fmt::format("a key length of {} in {} bytes", length, got);
    } else if (crc32c(std::span(b + 8, got - 8)) != load_le<std::uint32_t>(b + 4)) {
      fault = "CRC32C mismatch";
    }
    if (!fault.empty()) {
      throw ProtocolError(fmt::format("one-sided window: rank {} sent a malformed key: {}",
                                      o.peer, fault));
    }
    o.offset = load_le<std::uint64_t>(b + 8);
    o.key.assign(b + kKeyHeader, b + got);
  }
  for (std::size_t j = 0; j < sends.size(); ++j) {
    if (!hood_.wait(sends[j], "a one-sided window's key")) continue;  // that source is lost
  }
}

PutWindows::Out& PutWindows::out_of(int peer) {
  std::size_t i = 0;
  while (i < outs_.size() && outs_[i].peer != peer) ++i;
  if (i == outs_.size()) throw Error(fmt::format("one-sided window: rank {} is no target", peer));
  return outs_[i];
}

PutWindows::In& PutWindows::in_of(int peer) {
  std::size_t j = 0;
  while (j < ins_.size() && ins_[j].peer != peer) ++j;
  if (j == ins_.size()) throw Error(fmt::format("one-sided window: rank {} is no source", peer));
  return ins_[j];
}

bool PutWindows::put(int peer, std::int64_t round, const transport::Region& from,
                     transport::ByteRange range, std::uint32_t crc) {
  Out& o = out_of(peer);
  const std::size_t i = static_cast<std::size_t>(&o - outs_.data());
  const std::size_t s = static_cast<std::size_t>(round) % slots_;
  OutSlot& slot = o.slots[s];
  if (range.size != floats_ * sizeof(float)) {
    throw Error(fmt::format("one-sided window: a put of {} bytes, not {}", range.size,
                            floats_ * sizeof(float)));
  }
  if (o.lost) return false;
  if (slot.round >= 0) {
    // The slot's last round must have been read: its ack (our notices go out first, so that the
    // peer can read it at all).
    if (!slot.noticed || (slot.ack.valid() && !hood_.poll(slot.ack))) progress(slot.round);
    if (o.lost) return false;
    if (slot.ack.valid()) {
      if (!hood_.wait(slot.ack, "a one-sided ack")) {
        o.lost = true;
        return false;
      }
      const std::byte* a = small_.data() + out_ack(i, s).offset;
      if (slot.ack.state()->bytes != kAckBytes || load_le<std::uint32_t>(a) != kAckMagic ||
          load_le<std::int64_t>(a + 8) != slot.round) {
        throw ProtocolError(fmt::format(
            "one-sided window: rank {} acked round {} with a malformed ack ({} bytes)", peer,
            slot.round, slot.ack.state()->bytes));
      }
    }
    if (slot.notice.valid() && !hood_.wait(slot.notice, "a one-sided notice")) {
      o.lost = true;
      return false;
    }
  }
  slot = OutSlot{};
  slot.round = round;
  std::byte* n = small_.data() + out_notice(i, s).offset;
  store_le<std::uint32_t>(n, kNoticeMagic);
  store_le<std::uint32_t>(n + 4, crc);
  store_le<std::int64_t>(n + 8, round);
  store_le<std::uint64_t>(n + 16, range.size);
  slot.ack = transport_.recv(peer, layout_.make(purpose_, round, 0, kAckChunk), *small_region_,
                             out_ack(i, s));
  slot.put = transport_.put(peer, from, range, o.key, o.offset + s * stride_ * sizeof(float));
  slot.noticed = false;
  return true;
}

void PutWindows::send_notice(Out& o, std::size_t i, std::size_t s) {
  OutSlot& slot = o.slots[s];
  slot.notice = transport_.send(o.peer, layout_.make(purpose_, slot.round, 0, kNoticeChunk),
                                *small_region_, out_notice(i, s));
  slot.noticed = true;
}

void PutWindows::progress(std::int64_t through) {
  for (std::size_t i = 0; i < outs_.size(); ++i) {
    Out& o = outs_[i];
    for (std::size_t s = 0; s < slots_; ++s) {
      OutSlot& slot = o.slots[s];
      if (slot.noticed || o.lost) continue;
      if (slot.round > through && !hood_.poll(slot.put)) continue;
      if (!hood_.wait(slot.put, "a one-sided put")) {
        o.lost = true;
        continue;
      }
      send_notice(o, i, s);
    }
  }
}

void PutWindows::wait_sent(std::int64_t round) {
  if (round < 0) return;
  for (Out& o : outs_) {
    OutSlot& slot = o.slots[static_cast<std::size_t>(round) % slots_];
    if (slot.round == round && !slot.noticed && !o.lost) {
      progress(round);
      return;
    }
  }
}

void PutWindows::expect(int source, std::int64_t round) {
  In& in = in_of(source);
  const std::size_t j = static_cast<std::size_t>(&in - ins_.data());
  const std::size_t s = static_cast<std::size_t>(round) % slots_;
  InSlot& slot = in.slots[s];
  // A slot not released: its round was lost with its sender (landed() found it gone).
  if (!slot.released && slot.notice.valid() && !slot.notice.state()->done) transport_.cancel(slot.notice);
  slot.round = round;
  slot.released = false;
  slot.notice = transport_.recv(source, layout_.make(purpose_, round, 0, kNoticeChunk),
                                *small_region_, in_notice(j, s));
}

std::span<const float> PutWindows::landed(int source, std::int64_t round) {
  In& in = in_of(source);
  const std::size_t j = static_cast<std::size_t>(&in - ins_.data());
  const std::size_t s = static_cast<std::size_t>(round) % slots_;
  InSlot& slot = in.slots[s];
  if (slot.round != round || slot.released) {
    throw Error(fmt::format("one-sided window: round {} from rank {} was not expected", round,
                            source));
  }
  // Before blocking, our own notices go out: the peer we wait for may be waiting for them.
  if (!hood_.poll(slot.notice)) progress(round);
  if (!hood_.wait(slot.notice, "a one-sided notice")) return {};
  const std::byte* n = small_.data() + in_notice(j, s).offset;
  const std::span<const float> message =
      window_.span().subspan((j * slots_ + s) * stride_, floats_);
  std::string fault;
  if (slot.notice.state()->bytes != kNoticeBytes) {
    fault = fmt::format("a notice of {} bytes, not {}", slot.notice.state()->bytes, kNoticeBytes);
  } else if (load_le<std::uint32_t>(n) != kNoticeMagic) {
    fault = "a notice with a bad magic";
  } else if (load_le<std::int64_t>(n + 8) != round) {
    fault = fmt::format("a notice of round {}", load_le<std::int64_t>(n + 8));
  } else if (load_le<std::uint64_t>(n + 16) != message.size_bytes()) {
    fault = fmt::format("a notice of {} bytes written, not {}", load_le<std::uint64_t>(n + 16),
                        message.size_bytes());
  } else if (crc32c(std::as_bytes(message)) != load_le<std::uint32_t>(n + 4)) {
    fault = "a message whose CRC32C is not its notice's (torn, or written twice)";
  }
  if (!fault.empty()) {
    throw ProtocolError(fmt::format("one-sided window: rank {}, round {}: {}", source, round,
                                    fault));
  }
  return message;
}

void PutWindows::release(int source, std::int64_t round) {
  In& in = in_of(source);
  const std::size_t j = static_cast<std::size_t>(&in - ins_.data());
  const std::size_t s = static_cast<std::size_t>(round) % slots_;
  InSlot& slot = in.slots[s];
  if (slot.round != round || slot.released) return;
  slot.released = true;
  // The ack buffer of this slot is free once its previous ack has left.
  if (slot.ack.valid() && !hood_.wait(slot.ack, "a one-sided ack")) return;
  std::byte* a = small_.data() + in_ack(j, s).offset;
  store_le<std::uint32_t>(a, kAckMagic);
  store_le<std::uint32_t>(a + 4, 0);
  store_le<std::int64_t>(a + 8, round);
  slot.ack = transport_.send(source, layout_.make(purpose_, round, 0, kAckChunk), *small_region_,
                             in_ack(j, s));
}

void PutWindows::finish() {
  progress(std::numeric_limits<std::int64_t>::max());
  for (std::size_t i = 0; i < outs_.size(); ++i) {
    Out& o = outs_[i];
    for (OutSlot& slot : o.slots) {
      if (o.lost || slot.round < 0) continue;
      for (transport::Request* q : {&slot.notice, &slot.ack}) {
        if (q->valid() && !hood_.wait(*q, "a one-sided notice or ack")) o.lost = true;
        if (o.lost) break;
      }
    }
  }
  for (In& in : ins_) {
    for (InSlot& slot : in.slots) {
      if (slot.ack.valid()) hood_.wait(slot.ack, "a one-sided ack");
    }
  }
}

}  // namespace murmur::optimizers
