#include "engine/thread_pool.h"

#include <string>
#include <system_error>

#include "engine/error.h"

namespace ordo {

namespace {

// About a millisecond of polling: longer than the gaps between the products of one
// decode step, far shorter than anything a person notices on an idle engine.
constexpr int kSpins = 1000;

// Polling yields the CPU (as OpenBLAS's own workers do) rather than spinning on
// _mm_pause() or a bare load. Measured in this 2-vCPU VM: PAUSE loops trigger KVM's
// pause-loop exiting and a 35 us product took 4.5 ms; bare loads left a 2-thread decode
// no faster than one thread; sched_yield gave 1.5x.
void relax() { std::this_thread::yield(); }

}  // namespace

ThreadPool::ThreadPool(int threads) {
  try {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
  } catch (const std::system_error& e) {
    // No stack for one more thread (a memory limit, a thread limit). The workers
    // already started are joinable: stop and join them, or std::terminate follows.
    const auto started = workers_.size() + 1;
    stop_workers();
    throw Error("--threads " + std::to_string(threads),
                "could start only " + std::to_string(started) + " threads: " + e.what(),
                "use fewer threads, or raise the limit on memory (ulimit -v) or processes (ulimit -u)");
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

void ThreadPool::run(FunctionRef<void(int)> task) {
  std::unique_lock run_lock(run_mutex_, std::try_to_lock);
  if (!run_lock || workers_.empty()) {
    for (int i = 0; i < threads(); ++i) task(i);
    return;
  }
  task_ = &task;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    const std::lock_guard lock(mutex_);  // a worker between its check and its wait sees this
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  task(0);
  while (pending_.load(std::memory_order_acquire) != 0) relax();
}

void ThreadPool::work(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    std::uint64_t now = generation_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpins; ++spin) {
      relax();
      now = generation_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    {
      const std::lock_guard lock(mutex_);
      if (stop_) return;
    }
    (*task_)(index);
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace ordo
