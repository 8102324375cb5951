#include "tools/cli/stop_signals.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <pthread.h>
#include <thread>

namespace ordo::tools {

namespace {

// Lock-free atomics, so the handler may touch them.
std::atomic<int> received{0};
std::atomic<int> first_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void count_stop_signal(int signal) {
  int none = 0;
  first_signal.compare_exchange_strong(none, signal);
  received.fetch_add(1);
}

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

StopSignals::StopSignals() {
  struct sigaction action {};
  action.sa_handler = count_stop_signal;
  action.sa_flags = SA_RESTART;  // an interrupted read or wait resumes
  sigemptyset(&action.sa_mask);
  // A signal ignored when ordo started stays ignored (nohup, or a shell's background job
  // that the terminal's Ctrl-C must not stop): the caller's choice, as every Unix tool keeps it.
  for (const int signal : {SIGTERM, SIGINT}) {
    struct sigaction before {};
    if (sigaction(signal, nullptr, &before) == 0 && before.sa_handler == SIG_IGN) continue;
    sigaction(signal, &action, nullptr);
  }
  std::signal(SIGPIPE, SIG_IGN);
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void StopSignals::unblock_here() {
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

int StopSignals::count() const { return received.load(); }

int StopSignals::first() const { return first_signal.load(); }

const char* StopSignals::first_name() const { return first() == SIGINT ? "SIGINT" : "SIGTERM"; }

bool StopSignals::wait_beyond(int seen, std::chrono::milliseconds timeout) const {
  // Polled: a handler that runs on another thread cannot wake this one. A signal taken
  // by this thread cuts the sleep short.
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (received.load() <= seen) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= end) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(end - now, std::chrono::milliseconds(20)));
  }
  return true;
}

}  // namespace ordo::tools
