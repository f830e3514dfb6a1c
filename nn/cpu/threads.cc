#include "nn/cpu/threads.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <cblas.h>

namespace murmur::nn::cpu {
namespace {

// A fixed set of workers that run the chunks of one parallel_for at a time. The caller runs
// chunk 0 itself, so n threads means n - 1 workers.
class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i] { loop(i + 1); });
  }
  ~Pool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int workers() const { return static_cast<int>(threads_.size()); }

  void run(int chunks, std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn) {
    // Peers simulated as threads of one process share the pool: one loop at a time.
    std::lock_guard caller(run_mu_);
    {
      std::lock_guard lock(mu_);
      fn_ = &fn;
      n_ = n;
      chunks_ = chunks;
      pending_ = chunks - 1;
      ++generation_;
    }
    wake_.notify_all();
    auto [b, e] = range(0);
    fn(b, e);
    std::unique_lock lock(mu_);
    done_.wait(lock, [this] { return pending_ == 0; });
    fn_ = nullptr;
  }

 private:
  std::pair<std::int64_t, std::int64_t> range(int chunk) const {
    return {n_ * chunk / chunks_, n_ * (chunk + 1) / chunks_};
  }
  void loop(int chunk) {
    std::uint64_t seen = 0;
    for (;;) {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (chunk >= chunks_) continue;
      auto [b, e] = range(chunk);
      const auto* fn = fn_;
      lock.unlock();
      (*fn)(b, e);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex run_mu_;  // held by the caller of run() for the whole loop; taken before mu_
  std::mutex mu_;      // guards every member below it
  std::condition_variable wake_, done_;
  const std::function<void(std::int64_t, std::int64_t)>* fn_ = nullptr;
  std::int64_t n_ = 0;
  int chunks_ = 0;
  int pending_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

int g_threads = 1;
std::unique_ptr<Pool> g_pool;

}  // namespace

void set_compute_threads(int n) {
  if (n <= 0) n = std::max(1u, std::thread::hardware_concurrency());
  g_threads = n;
  openblas_set_num_threads(n);
  if (n > 1) {
    if (!g_pool || g_pool->workers() != n - 1) g_pool = std::make_unique<Pool>(n - 1);
  } else {
    g_pool.reset();
  }
}

int compute_threads() { return g_threads; }

void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const int chunks =
      static_cast<int>(std::min<std::int64_t>(g_threads, (n + grain - 1) / grain));
  if (chunks <= 1 || !g_pool) {
    fn(0, n);
    return;
  }
  g_pool->run(chunks, n, fn);
}

}  // namespace murmur::nn::cpu
