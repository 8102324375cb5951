// How a long call from Python stops early: the C++ API runs an InterruptCheck before
// every decoder step (ordo/options.hpp), and the checks made here run Python's own
// signal handlers there, so Ctrl-C raises KeyboardInterrupt within one step.
#pragma once

#include <pybind11/pybind11.h>

#include "ordo/ordo.hpp"

namespace ordo::python {

namespace py = pybind11;

// For a call about to release the GIL. On the main thread (the only one Python runs
// signal handlers on), a check that takes the GIL and runs the pending handlers: one
// that raises (SIGINT's, KeyboardInterrupt) ends the call with that exception. Then, if
// `also` is not None, calls it (with the GIL): what it raises ends the call too. It
// borrows `also`: keep it alive for the call. Empty when there is
// nothing to check.
InterruptCheck interrupt_check(const py::object& also = py::none());

}  // namespace ordo::python
