#include "optimizers/comm_thread.h"

#include <utility>

#include "core/stopwatch.h"

namespace murmur::optimizers {

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

}  // namespace murmur::optimizers
