#include "runtime/sample_shuffle.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/rng.h"
#include "transport/collectives.h"
#include "transport/tag.h"

namespace murmur::runtime {

namespace {
constexpr std::uint32_t kMagic = 0x4853524d;  // "MRSH"
constexpr std::size_t kHeader = 24;           // magic, count, sample floats, crc32c, round

template <class T>
void put(std::vector<std::byte>& b, std::size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}
template <class T>
T get(const std::vector<std::byte>& b, std::size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}
}  // namespace

std::size_t shuffle_message_bytes(std::int64_t k, std::int64_t sample_floats) {
  const auto n = static_cast<std::size_t>(k);
  return kHeader + n * (sizeof(std::int64_t) + sizeof(std::int32_t)) +
         n * static_cast<std::size_t>(sample_floats) * sizeof(float);
}

SampleShuffle::SampleShuffle(const nn::Dataset& data, const std::vector<std::int64_t>& shard,
                             std::int64_t smallest, const ExperimentConfig& config, int rank,
                             std::int64_t steps_per_epoch)
    : data_(data),
      origin_(shard),
      rank_(rank),
      world_(config.world.size),
      seed_(Rng(config.run.seed).fork(0x5348554646ull).next_u64()),
      k_(static_cast<std::int64_t>(std::floor(config.data.shuffle.fraction * static_cast<double>(smallest)))),
      every_(config.data.shuffle.every_steps > 0 ? config.data.shuffle.every_steps
                                                 : std::max<std::int64_t>(1, steps_per_epoch)) {
  const AlgorithmConfig& a = config.algorithm;
  auto refuse = [&](const std::string& why) {
    throw ConfigError(fmt::format("data.shuffle.fraction: {}: {}", config.data.shuffle.fraction, why));
  };
  if (world_ < 2) refuse("a shuffle needs 2 or more peers (world.size)");
  if (a.overlap || a.name == "adpsgd" || a.name == "pairwise") {
    refuse(fmt::format("the trades use the transport from the training thread, which {} leaves "
                       "to its communication thread", a.overlap ? "algorithm.overlap" : a.name));
  }
  if (config.run.on_peer_failure != "stop") refuse("needs run.on_peer_failure: stop");
  if (k_ < 1) {
    refuse(fmt::format("under one sample of the smallest shard ({} samples)", smallest));
  }
  // The local shard: this peer's samples, copied once, which the trades overwrite.
  const std::int64_t floats = data.sample_floats();
  local_.size = static_cast<std::int64_t>(shard.size());
  local_.channels = data.channels;
  local_.height = data.height;
  local_.width = data.width;
  local_.classes = data.classes;
  local_.images.resize(shard.size() * static_cast<std::size_t>(floats));
  local_.labels.resize(shard.size());
  restore(shard);
  out_.resize(shuffle_message_bytes(k_, floats));
  in_.resize(out_.size());
}

// A trade still in flight when the trainer unwinds: the trainer destroys its transport first
// (declared after this), so nothing lands in the buffers freed here.
SampleShuffle::~SampleShuffle() = default;

std::vector<std::int64_t> SampleShuffle::local_indices() const {
  std::vector<std::int64_t> all(static_cast<std::size_t>(local_.size));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

void SampleShuffle::restore(const std::vector<std::int64_t>& origin) {
  if (static_cast<std::int64_t>(origin.size()) != local_.size) {
    throw CheckpointError(fmt::format("data.shuffle: the checkpoint's shard has {} samples, this "
                                      "peer's {}", origin.size(), local_.size));
  }
  // Every index checked before a row changes: a bad checkpoint leaves the shard as it was.
  for (std::size_t i = 0; i < origin.size(); ++i) {
    if (origin[i] < 0 || origin[i] >= data_.size) {
      throw CheckpointError(fmt::format("data.shuffle: sample {} of the checkpoint's shard is {}, "
                                        "outside the data set's {}", i, origin[i], data_.size));
    }
  }
  const auto floats = static_cast<std::size_t>(data_.sample_floats());
  for (std::size_t i = 0; i < origin.size(); ++i) {
    std::copy_n(data_.image(origin[i]), floats, local_.images.begin() + static_cast<std::ptrdiff_t>(i * floats));
    local_.labels[i] = data_.labels[static_cast<std::size_t>(origin[i])];
  }
  origin_ = origin;
}

void SampleShuffle::after_step(transport::Transport& transport, std::int64_t step,
                               std::chrono::milliseconds timeout) {
  complete(transport, timeout);  // the trade posted after the step before, if any
  if (step % every_ == 0) post(transport, step / every_);
}

void SampleShuffle::complete(transport::Transport& transport, std::chrono::milliseconds timeout) {
  if (!pending_) return;
  transport::wait_or_lost(transport, recv_, timeout, "a sample shuffle receive");
  transport::wait_or_lost(transport, send_, timeout, "a sample shuffle send");
  apply(transport);
}

void SampleShuffle::post(transport::Transport& transport, std::int64_t round) {
  if (!out_region_) {
    out_region_ = transport.register_region(out_);
    in_region_ = transport.register_region(in_);
  }
  // The partners of a hypercube's dimensions in turn (GossipGraD's rotation), as ring shifts so
  // that any number of peers works: after ceil(log2 P) rounds a sample can have reached anyone.
  int dims = 1;
  while ((1 << dims) < world_) ++dims;
  const int shift = 1 << static_cast<int>(round % dims);
  const int to = (rank_ + shift) % world_;
  from_ = (rank_ - shift % world_ + world_) % world_;
  // k distinct rows, drawn from the round's own stream (nothing to carry across a resume).
  Rng rng = Rng(seed_).fork(static_cast<std::uint64_t>(rank_)).fork(static_cast<std::uint64_t>(round));
  std::vector<std::int64_t> all = local_indices();
  for (std::int64_t j = 0; j < k_; ++j) {
    const auto pick = j + static_cast<std::int64_t>(rng.next_u64() % static_cast<std::uint64_t>(local_.size - j));
    std::swap(all[static_cast<std::size_t>(j)], all[static_cast<std::size_t>(pick)]);
  }
  rows_.assign(all.begin(), all.begin() + k_);
  const auto k = static_cast<std::size_t>(k_);
  const auto floats = static_cast<std::size_t>(local_.sample_floats());
  std::size_t at = kHeader;
  for (std::int64_t r : rows_) put(out_, (at += 8) - 8, origin_[static_cast<std::size_t>(r)]);
  for (std::int64_t r : rows_) put(out_, (at += 4) - 4, local_.labels[static_cast<std::size_t>(r)]);
  for (std::int64_t r : rows_) {
    std::memcpy(out_.data() + at, local_.images.data() + static_cast<std::size_t>(r) * floats,
                floats * sizeof(float));
    at += floats * sizeof(float);
  }
  put(out_, 0, kMagic);
  put(out_, 4, static_cast<std::uint32_t>(k));
  put(out_, 8, static_cast<std::uint32_t>(floats));
  put(out_, 12, crc32c(std::span<const std::byte>(out_).subspan(kHeader)));
  put(out_, 16, static_cast<std::uint64_t>(round));
  const transport::Tag tag = transport::TagLayout(transport).make(transport::purpose::kShuffle, round);
  recv_ = transport.recv(from_, tag, *in_region_, {0, in_.size()});
  send_ = transport.send(to, tag, *out_region_, {0, out_.size()});
  round_ = round;
  pending_ = true;
}

void SampleShuffle::apply(transport::Transport& transport) {
  pending_ = false;
  auto bad = [&](const std::string& what) {
    return ProtocolError(fmt::format("{}: rank {}: the sample shuffle's message of round {} from "
                                     "rank {}: {}", transport.name(), rank_, round_, from_, what));
  };
  const std::size_t bytes = recv_.state()->bytes;
  if (bytes != in_.size()) throw bad(fmt::format("{} bytes, expected {}", bytes, in_.size()));
  const auto k = static_cast<std::size_t>(k_);
  const auto floats = static_cast<std::size_t>(local_.sample_floats());
  if (get<std::uint32_t>(in_, 0) != kMagic) throw bad("bad magic");
  if (get<std::uint32_t>(in_, 4) != k || get<std::uint32_t>(in_, 8) != floats) {
    throw bad(fmt::format("{} samples of {} floats, expected {} of {}", get<std::uint32_t>(in_, 4),
                          get<std::uint32_t>(in_, 8), k, floats));
  }
  if (get<std::uint32_t>(in_, 12) != crc32c(std::span<const std::byte>(in_).subspan(kHeader))) {
    throw bad("CRC32C mismatch");
  }
  if (get<std::uint64_t>(in_, 16) != static_cast<std::uint64_t>(round_)) {
    throw bad(fmt::format("it says round {}", get<std::uint64_t>(in_, 16)));
  }
  const std::size_t labels = kHeader + 8 * k, images = labels + 4 * k;
  for (std::size_t j = 0; j < k; ++j) {
    const auto origin = get<std::int64_t>(in_, kHeader + 8 * j);
    const auto label = get<std::int32_t>(in_, labels + 4 * j);
    if (origin < 0 || origin >= data_.size) throw bad(fmt::format("sample index {} out of range", origin));
    if (label < 0 || label >= local_.classes) throw bad(fmt::format("label {} out of range", label));
  }
  // Checked: the received samples take the places of those sent.
  for (std::size_t j = 0; j < k; ++j) {
    const auto row = static_cast<std::size_t>(rows_[j]);
    origin_[row] = get<std::int64_t>(in_, kHeader + 8 * j);
    local_.labels[row] = get<std::int32_t>(in_, labels + 4 * j);
    std::memcpy(local_.images.data() + row * floats, in_.data() + images + j * floats * sizeof(float),
                floats * sizeof(float));
  }
  received_ += k_;
}

}  // namespace murmur::runtime
