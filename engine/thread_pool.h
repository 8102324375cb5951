// A small pool of worker threads for splitting one memory-bound product (a decode
// step's matrix-vector products) across cores. OpenBLAS threads its own GEMMs; this
// pool serves the kernels ordo runs itself (engine/matvec.h).
//
// Workers poll (yielding) for about a millisecond between tasks, because a decode step
// issues dozens of products a few microseconds apart and a sleeping thread takes far
// longer than that to wake (milliseconds in a VM); then they sleep, so an idle engine
// costs nothing.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/function_ref.h"
#include "engine/tensor.h"

namespace ordo {

class ThreadPool {
 public:
  // `threads` counts the caller: threads - 1 workers are started. When one cannot be
  // started, those already running are stopped and joined and Error is thrown.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs task(i) for every i in [0, threads()), part 0 on the calling thread, and
  // returns when all parts are done. One run at a time: a call made while another
  // thread's run is in progress runs all its parts itself rather than wait.
  void run(FunctionRef<void(int)> task);

 private:
  void work(int index);
  void stop_workers();  // wakes every worker to return, joins them, leaves none

  std::mutex run_mutex_;  // held by the caller whose task the workers run
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<std::uint64_t> generation_{0};  // bumped once per run
  std::atomic<int> pending_{0};               // workers still on the current task
  const FunctionRef<void(int)>* task_ = nullptr;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// The process's one pool: every thread ordo runs. The products (engine/blas.cpp) and
// attention split their work across it; OpenBLAS is kept single-threaded (blas.cpp), so
// two pools never compete for the same cores.
namespace threads {

// Threads every computation may use from now on; n <= 0 keeps the current number
// (every core until set). Throws Error when a thread cannot be started.
void set_count(int n);

// The threads set (the most parts parallel_for may use now).
int count();

// Starts the pool unless it runs already. A caller that sizes its buffers up front
// (Decoder::start) calls it, so that no later product allocates.
void prepare();

// The pool when a job of `work` units, against a `threshold` below which waking the
// workers costs more than it saves, is worth splitting; null to run it on the caller.
std::shared_ptr<ThreadPool> workers_for(Index work, Index threshold);

// Splits [0, count) into the pool's parts, in multiples of `unit`, and runs
// task(first, count, part) on each non-empty part.
template <class Task>
void split(ThreadPool& workers, Index count, Index unit, const Task& task) {
  const Index parts = workers.threads();
  const Index per_part = (count / parts + unit - 1) / unit * unit;
  workers.run([&](int part) {
    const Index first = std::min(count, part * per_part);
    const Index last = part + 1 == parts ? count : std::min(count, first + per_part);
    if (last > first) task(first, last - first, part);
  });
}

// Runs task(first, count, part) over parts that cover [0, count) once, one per thread
// (part in [0, count())), when count items of work_per_item multiply-adds each are worth
// waking the threads for; otherwise task(0, count, 0) on the calling thread. Called from
// inside a task, it runs on the calling thread alone. After every part has ended, the
// exception of the lowest part that threw is rethrown here: the same one however the
// threads ran.
void parallel_for(Index count, Index work_per_item, FunctionRef<void(Index first, Index count, int part)> task);

}  // namespace threads

}  // namespace ordo
