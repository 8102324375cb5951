// A small pool of worker threads for splitting one memory-bound product (a decode
// step's matrix-vector products) across cores. OpenBLAS threads its own GEMMs; this
// pool serves the kernels ordo runs itself (engine/matvec.h).
//
// Workers poll (yielding) for about a millisecond between tasks, because a decode step
// issues dozens of products a few microseconds apart and a sleeping thread takes far
// longer than that to wake (milliseconds in a VM); then they sleep, so an idle engine
// costs nothing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/function_ref.h"

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

}  // namespace ordo
