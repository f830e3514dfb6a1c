// The sparse allreduce (sparse_allreduce.h): recursive doubling over (index, value) pairs,
// switching to dense where a merge fills half the vector.
#include "transport/sparse_allreduce.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "core/crc32c.h"
#include "core/error.h"
#include "transport/tag.h"

namespace murmur::transport {

namespace {
constexpr std::uint32_t kMagic = 0x5053524dU;  // "MRSP", little-endian
constexpr std::uint32_t kSparse = 0, kDense = 1;
constexpr std::size_t kHeaderBytes = 16;  // magic, format, count, crc32c: u32 each

void put_u32(std::byte* at, std::uint32_t v) {
  for (int b = 0; b < 4; ++b) at[b] = static_cast<std::byte>((v >> (8 * b)) & 0xFF);
}
std::uint32_t get_u32(const std::byte* at) {
  std::uint32_t v = 0;
  for (int b = 0; b < 4; ++b) v |= std::to_integer<std::uint32_t>(at[b]) << (8 * b);
  return v;
}
}  // namespace

std::size_t SparseAllreduce::sparse_message_bytes(std::size_t pairs) {
  return kHeaderBytes + pairs * (sizeof(std::uint32_t) + sizeof(float));
}

SparseAllreduce::SparseAllreduce(Transport& transport, std::size_t n, CollectiveOptions options)
    : transport_(transport), n_(n), options_(options) {
  if (n > 0xFFFFFFFFu) {
    throw TransportError(fmt::format("sparse allreduce: {} floats do not fit 32-bit indices", n));
  }
  // The largest message: the dense vector, or max_sparse_pairs(n) pairs (no more bytes).
  const std::size_t most = kHeaderBytes + n * sizeof(float);
  send_buf_.resize(most);
  recv_buf_.resize(most);
  send_region_ = transport_.register_region(send_buf_);
  recv_region_ = transport_.register_region(recv_buf_);
}

SparseAllreduce::~SparseAllreduce() {
  // The registrations go before their memory.
  send_region_.reset();
  recv_region_.reset();
}

void SparseAllreduce::encode(std::span<std::byte> into, std::size_t* bytes) const {
  std::byte* payload = into.data() + kHeaderBytes;
  std::size_t payload_bytes = 0;
  std::uint32_t count = 0;
  if (dense_) {
    count = static_cast<std::uint32_t>(n_);
    payload_bytes = n_ * sizeof(float);
    std::memcpy(payload, dense_values_.data(), payload_bytes);
  } else {
    count = static_cast<std::uint32_t>(index_.size());
    std::memcpy(payload, index_.data(), count * sizeof(std::uint32_t));
    std::memcpy(payload + count * sizeof(std::uint32_t), value_.data(), count * sizeof(float));
    payload_bytes = count * (sizeof(std::uint32_t) + sizeof(float));
  }
  put_u32(into.data(), kMagic);
  put_u32(into.data() + 4, dense_ ? kDense : kSparse);
  put_u32(into.data() + 8, count);
  put_u32(into.data() + 12, crc32c(std::span<const std::byte>(payload, payload_bytes)));
  *bytes = kHeaderBytes + payload_bytes;
}

void SparseAllreduce::merge_received(int peer, std::size_t bytes, std::uint64_t step) {
  auto bad = [&](const std::string& why) {
    return ProtocolError(fmt::format("sparse allreduce: rank {}'s message of step {} ({} bytes): "
                                     "{}", peer, step, bytes, why));
  };
  // Sizes first, then the checksum, then the contents; nothing is used before it is checked.
  if (bytes < kHeaderBytes) throw bad("shorter than its 16-byte header");
  const std::byte* at = recv_buf_.data();
  if (get_u32(at) != kMagic) throw bad(fmt::format("bad magic {:#x}", get_u32(at)));
  const std::uint32_t format = get_u32(at + 4), count = get_u32(at + 8), crc = get_u32(at + 12);
  if (format != kSparse && format != kDense) throw bad(fmt::format("unknown format {}", format));
  const bool dense = format == kDense;
  if (dense && count != n_) throw bad(fmt::format("a dense vector of {} floats, not {}", count, n_));
  if (!dense && count > max_sparse_pairs(n_)) {
    throw bad(fmt::format("{} pairs, above the {} a vector of {} floats sends sparse", count,
                          max_sparse_pairs(n_), n_));
  }
  const std::size_t payload_bytes =
      dense ? n_ * sizeof(float) : std::size_t{count} * (sizeof(std::uint32_t) + sizeof(float));
  if (bytes != kHeaderBytes + payload_bytes) {
    throw bad(fmt::format("{} bytes of payload for {} {}", bytes - kHeaderBytes, count,
                          dense ? "floats" : "pairs"));
  }
  const std::byte* payload = at + kHeaderBytes;
  if (crc32c(std::span<const std::byte>(payload, payload_bytes)) != crc) {
    throw bad("CRC32C mismatch");
  }
  if (dense) {
    std::vector<float> theirs(n_);
    std::memcpy(theirs.data(), payload, payload_bytes);
    if (!dense_) {
      dense_values_.assign(n_, 0.0f);
      for (std::size_t j = 0; j < index_.size(); ++j) dense_values_[index_[j]] = value_[j];
      dense_ = true;
    }
    for (std::size_t i = 0; i < n_; ++i) dense_values_[i] += theirs[i];
    return;
  }
  std::vector<std::uint32_t> their_index(count);
  std::vector<float> their_value(count);
  std::memcpy(their_index.data(), payload, count * sizeof(std::uint32_t));
  std::memcpy(their_value.data(), payload + count * sizeof(std::uint32_t), count * sizeof(float));
  for (std::size_t j = 0; j < count; ++j) {
    if (their_index[j] >= n_ || (j > 0 && their_index[j] <= their_index[j - 1])) {
      throw bad(fmt::format("index {} at entry {} is out of order or >= {}", their_index[j], j,
                            n_));
    }
  }
  if (dense_) {
    for (std::size_t j = 0; j < count; ++j) dense_values_[their_index[j]] += their_value[j];
    return;
  }
  // Both sparse: merge the sorted lists; a + b == b + a, so both partners get the same floats.
  merged_index_.clear();
  merged_value_.clear();
  std::size_t a = 0, b = 0;
  while (a < index_.size() || b < count) {
    if (b == count || (a < index_.size() && index_[a] < their_index[b])) {
      merged_index_.push_back(index_[a]);
      merged_value_.push_back(value_[a++]);
    } else if (a == index_.size() || their_index[b] < index_[a]) {
      merged_index_.push_back(their_index[b]);
      merged_value_.push_back(their_value[b++]);
    } else {
      merged_index_.push_back(index_[a]);
      merged_value_.push_back(value_[a++] + their_value[b++]);
    }
  }
  if (merged_index_.size() > max_sparse_pairs(n_)) {
    dense_values_.assign(n_, 0.0f);
    for (std::size_t j = 0; j < merged_index_.size(); ++j) {
      dense_values_[merged_index_[j]] = merged_value_[j];
    }
    dense_ = true;
    return;
  }
  index_.swap(merged_index_);
  value_.swap(merged_value_);
}

void SparseAllreduce::exchange(int peer, std::uint64_t step, bool send, bool receive, Tag tag,
                               SparseAllreduceStats& stats) {
  const TagLayout layout(transport_);
  const Tag t = layout.with(tag, step, 0);
  std::vector<Request> requests;
  CancelOnUnwind guard(transport_);
  guard.watch(requests);
  if (receive) requests.push_back(transport_.recv(peer, t, *recv_region_, {0, recv_buf_.size()}));
  if (send) {
    std::size_t bytes = 0;
    encode(send_buf_, &bytes);
    requests.push_back(transport_.send(peer, t, *send_region_, {0, bytes}));
    stats.bytes_sent += bytes;
  }
  for (auto& r : requests) {
    wait_or_lost(transport_, r, options_.timeout, "a sparse allreduce exchange");
  }
  if (receive) merge_received(peer, requests.front().state()->bytes, step);
}

SparseAllreduceStats SparseAllreduce::run(std::span<const std::uint32_t> index,
                                          std::span<const float> value, std::span<float> out,
                                          ReduceOp op, Tag tag) {
  if (index.size() != value.size() || out.size() != n_) {
    throw TransportError(fmt::format("sparse allreduce: {} indices, {} values, {} outputs for a "
                                     "vector of {}", index.size(), value.size(), out.size(), n_));
  }
  for (std::size_t j = 0; j < index.size(); ++j) {
    if (index[j] >= n_ || (j > 0 && index[j] <= index[j - 1])) {
      throw TransportError(fmt::format("sparse allreduce: this rank's index {} at entry {} is out "
                                       "of order or >= {}", index[j], j, n_));
    }
  }
  const TagLayout layout(transport_);
  if (!layout.is_base(tag)) {
    throw TransportError(fmt::format("sparse allreduce: tag {:#x} has its step or chunk set", tag));
  }
  const auto N = static_cast<std::size_t>(transport_.world_size());
  const auto i = static_cast<std::size_t>(transport_.rank());
  const std::size_t p = std::bit_floor(N), q = N - p;
  const auto levels = static_cast<std::uint64_t>(std::countr_zero(p));
  const std::uint64_t last_step = levels + 1;
  if (last_step >= layout.max_steps()) {
    throw TransportError(fmt::format("sparse allreduce: {} steps for {} ranks, but the tag "
                                     "layout numbers {}", last_step + 1, N, layout.max_steps()));
  }

  SparseAllreduceStats stats;
  dense_ = index.size() > max_sparse_pairs(n_);
  if (dense_) {
    dense_values_.assign(n_, 0.0f);
    for (std::size_t j = 0; j < index.size(); ++j) dense_values_[index[j]] = value[j];
    stats.went_dense = true;
    stats.dense_from_level = 0;
  } else {
    index_.assign(index.begin(), index.end());
    value_.assign(value.begin(), value.end());
  }
  auto note_dense = [&](int level) {
    if (dense_ && !stats.went_dense) {
      stats.went_dense = true;
      stats.dense_from_level = level;
    }
  };

  const bool folds = i < 2 * q && i % 2 == 0;  // hands its vector on, takes the result back
  const std::size_t v = i < 2 * q ? i / 2 : i - q;
  auto index_of = [&](std::size_t virt) { return virt < q ? 2 * virt + 1 : virt + q; };
  if (N > 1 && folds) {
    exchange(static_cast<int>(i + 1), 0, true, false, tag, stats);
    // The result replaces this rank's own vector, which it already contains.
    dense_ = false;
    index_.clear();
    value_.clear();
    exchange(static_cast<int>(i + 1), last_step, false, true, tag, stats);
    note_dense(static_cast<int>(levels));
  } else if (N > 1) {
    if (i < 2 * q) {
      exchange(static_cast<int>(i - 1), 0, false, true, tag, stats);
      note_dense(0);
    }
    for (std::uint64_t k = 0; k < levels; ++k) {
      const int partner = static_cast<int>(index_of(v ^ (std::size_t{1} << k)));
      exchange(partner, 1 + k, true, true, tag, stats);
      note_dense(static_cast<int>(k + 1));
    }
    if (i < 2 * q) exchange(static_cast<int>(i - 1), last_step, true, false, tag, stats);
  }

  const float scale = op == ReduceOp::kAverage ? 1.0f / static_cast<float>(N) : 1.0f;
  if (dense_) {
    for (std::size_t j = 0; j < n_; ++j) out[j] = dense_values_[j] * scale;
    stats.result_nonzeros = n_;
  } else {
    std::fill(out.begin(), out.end(), 0.0f);
    for (std::size_t j = 0; j < index_.size(); ++j) out[index_[j]] = value_[j] * scale;
    stats.result_nonzeros = index_.size();
  }
  return stats;
}

}  // namespace murmur::transport
