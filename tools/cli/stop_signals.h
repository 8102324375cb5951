// How a long command learns it must stop: SIGTERM and SIGINT, counted, whichever thread of
// the process the kernel gives them to. ordo serve drains at the first and cuts the drain
// short at a second; ordo quantize stops between tensors and removes what it wrote.
//
// Why a handler and not sigwait alone: a process-directed signal goes to any thread that
// does not block it, and threads started before main() (OpenBLAS starts its pool while the
// library loads) do not block it. With no handler, such a signal took the default action
// and killed the server mid-drain (seen: a second SIGTERM sent just after the first was
// taken ended ordo with status 143 and its clients got no answer). The handler only
// counts, so wherever it runs, nothing is lost.
#pragma once

#include <chrono>

namespace ordo::tools {

class StopSignals {
 public:
  // Installs the handler for SIGTERM and SIGINT (and ignores SIGPIPE: a client gone
  // mid-answer must not kill the server), and blocks both in the calling thread, so that
  // the threads it starts from now on inherit the block and are never interrupted.
  StopSignals();
  // Lets the calling thread take them: the thread that waits (and sleeps) below.
  void unblock_here();
  // The signals received so far (SIGTERM and SIGINT together).
  int count() const;
  // The first signal's number (SIGTERM or SIGINT) once count() > 0, else 0.
  int first() const;
  // Its name for messages: "SIGINT" or "SIGTERM".
  const char* first_name() const;
  // Sleeps until count() > `seen` or `timeout` passes; true when a new signal came.
  bool wait_beyond(int seen, std::chrono::milliseconds timeout) const;
};

}  // namespace ordo::tools
