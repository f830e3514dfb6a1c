#include "optimizers/comm_thread.h"

#include <fmt/format.h>

#include "core/error.h"
#include "topology/schedule.h"

namespace murmur::optimizers {

transport::Tag p2p_tag(Purpose purpose, std::int64_t round) {
  return (static_cast<std::uint64_t>(purpose) << 48) |
         (static_cast<std::uint64_t>(round) & ((std::uint64_t{1} << 48) - 1));
}

transport::Tag chunk_tag(Purpose purpose, std::int64_t round, std::size_t chunk) {
  if (chunk >= kMaxChunks) {
    throw Error(fmt::format("chunk {} of a chunked exchange: at most {} chunks fit the tag",
                            chunk, kMaxChunks));
  }
  const std::uint64_t r = static_cast<std::uint64_t>(round) & ((std::uint64_t{1} << 28) - 1);
  return (static_cast<std::uint64_t>(purpose) << 48) | (r << 20) | chunk;
}

transport::Tag allreduce_tag(ReducePurpose purpose, std::int64_t round) {
  // 24 bits of round: a tag repeats only after 16M rounds, when nothing of the old round is
  // in flight any more (each allreduce completes before the next starts).
  return (static_cast<std::uint64_t>(purpose) << 24) |
         (static_cast<std::uint64_t>(round) & 0xFFFFFF);
}

transport::CollectiveOptions collective_options(const TransportConfig& config) {
  transport::CollectiveOptions o;
  o.timeout = std::chrono::milliseconds(config.recv_timeout_ms);
  o.chunk_bytes = static_cast<std::size_t>(config.chunk_bytes);
  return o;
}

RecvSlots::RecvSlots(transport::Transport& transport, std::size_t floats)
    : transport_(transport), floats_(floats), stride_((floats + 63) / 64 * 64) {
  if (stride_ == 0) stride_ = 64;
}

void RecvSlots::reserve(std::size_t count) {
  if (count <= count_) return;
  region_.reset();
  storage_.assign(count * stride_, 0.0f);
  region_ = transport_.register_region(std::as_writable_bytes(std::span(storage_)));
  count_ = count;
}

std::vector<std::size_t> exchange_into_slots(transport::Transport& transport, transport::Tag tag,
                                             const transport::Region& from,
                                             transport::ByteRange out, std::span<const int> send_to,
                                             RecvSlots& slots, std::span<const int> recv_from,
                                             const transport::CollectiveOptions& options,
                                             bool exact_size) {
  slots.reserve(std::max<std::size_t>(1, recv_from.size()));
  std::vector<transport::ByteRange> in(recv_from.size());
  for (std::size_t k = 0; k < in.size(); ++k) in[k] = slots.range(k);
  auto got = transport::neighbor_exchange(transport, tag, from, out, send_to, slots.region(), in,
                                          recv_from, options);
  for (std::size_t k = 0; k < got.size() && exact_size; ++k) {
    if (got[k] != in[k].size) {
      throw ProtocolError(fmt::format(
          "{}: rank {}: rank {} sent {} bytes under tag {:#x}, expected {} (are the models the "
          "same size?)",
          transport.name(), transport.rank(), recv_from[k], got[k], tag, in[k].size));
    }
  }
  return got;
}

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CommThread::start(std::function<void()> job) {
  wait();
  {
    std::lock_guard lock(mutex_);
    job_ = std::move(job);
    busy_ = true;
  }
  cv_.notify_all();
}

double CommThread::wait() {
  Stopwatch blocked;
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex_);
    if (!busy_ && !error_) return 0;
    cv_.wait(lock, [&] { return !busy_; });
    error = std::exchange(error_, nullptr);
  }
  const double s = blocked.seconds();
  if (error) std::rethrow_exception(error);
  return s;
}

bool CommThread::busy() const {
  std::lock_guard lock(mutex_);
  return busy_;
}

void CommThread::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || busy_; });
    if (busy_) {
      auto job = std::move(job_);
      lock.unlock();
      std::exception_ptr error;
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      error_ = error;
      busy_ = false;
      cv_.notify_all();
    } else if (stop_) {
      return;
    }
  }
}

MixingSchedule::MixingSchedule(const TopologyConfig& config, int n, int rank, std::uint64_t seed)
    : config_(config),
      n_(n),
      rank_(rank),
      seed_(seed),
      time_varying_(topology::is_time_varying(config)) {
  current_ = topology::rank_mixing(config_, n_, rank_, seed_, 0);
  round_ = 0;
}

const topology::RankMixing& MixingSchedule::at(std::int64_t round) {
  if (time_varying_ && round != round_) {
    current_ = topology::rank_mixing(config_, n_, rank_, seed_, round);
    round_ = round;
  }
  return current_;
}

}  // namespace murmur::optimizers
