#include "engine/thread_pool.h"

#include <exception>
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
                "use fewer threads, or raise the limit on memory (ulimit -v or ulimit -d) or processes (ulimit -u)");
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

namespace threads {

namespace {

// Below this many multiply-adds a job is run on the caller (see blas.cpp for the
// products' own thresholds).
constexpr Index kParallelWork = Index{1} << 16;

std::mutex pool_mutex;
std::shared_ptr<ThreadPool>& pool_slot() {
  static std::shared_ptr<ThreadPool> pool;
  return pool;
}

std::shared_ptr<ThreadPool> pool() {
  const std::lock_guard lock(pool_mutex);
  auto& slot = pool_slot();
  if (!slot) slot = std::make_shared<ThreadPool>(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return slot;
}

}  // namespace

void set_count(int n) {
  if (n <= 0) return;
  const std::lock_guard lock(pool_mutex);
  auto& slot = pool_slot();
  if (!slot || slot->threads() != n) slot = std::make_shared<ThreadPool>(n);  // a running job keeps the old one
}

int count() { return pool()->threads(); }

void prepare() { pool(); }

std::shared_ptr<ThreadPool> workers_for(Index work, Index threshold) {
  if (work < threshold) return nullptr;
  std::shared_ptr<ThreadPool> workers = pool();
  return workers->threads() > 1 ? workers : nullptr;
}

void parallel_for(Index count, Index work_per_item, FunctionRef<void(Index first, Index count, int part)> task) {
  if (count <= 0) return;
  const std::shared_ptr<ThreadPool> workers = count > 1 ? workers_for(count * work_per_item, kParallelWork) : nullptr;
  if (!workers) return task(0, count, 0);
  // An exception must not leave a worker thread (that would end the process): the
  // lowest failing part's is carried back, so that the error a caller sees (the first
  // bad row, say) does not depend on which thread ran first. Nothing is allocated unless
  // a part throws: attention runs this on every layer of a decode step.
  std::exception_ptr failure;
  int failed_part = -1;
  std::mutex failure_mutex;
  split(*workers, count, 1, [&](Index first, Index part_count, int part) {
    try {
      task(first, part_count, part);
    } catch (...) {
      const std::lock_guard lock(failure_mutex);
      if (failed_part < 0 || part < failed_part) {
        failure = std::current_exception();
        failed_part = part;
      }
    }
  });
  if (failure) std::rethrow_exception(failure);
}

}  // namespace threads

}  // namespace ordo
