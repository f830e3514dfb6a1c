// CommThread: the one background thread that runs an algorithm's exchange while the next local
// step computes (D-PSGD with overlap, AD-PSGD). It runs one job at a time: start() hands it a
// job, wait() blocks until the job is done and rethrows what it threw. While a job runs, the job
// is the only user of the Transport. Used by one owner thread.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace murmur::optimizers {

class CommThread {
 public:
  CommThread();
  // Waits for the job in flight (discarding its error) and joins.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Starts `job`; waits first for the one in flight, if any.
  void start(std::function<void()> job);
  // Returns the seconds spent blocked (0 if idle). Throws what the job threw.
  double wait();
  bool busy() const;

 private:
  void loop();

  mutable std::mutex mutex_;  // guards job_, busy_, stop_, error_
  std::condition_variable cv_;
  std::function<void()> job_;
  bool busy_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts after the state above exists
};

}  // namespace murmur::optimizers
