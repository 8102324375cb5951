#include "interrupt.h"

namespace ordo::python {

namespace {

bool on_main_thread() {
  const py::module_ threading = py::module_::import("threading");
  return threading.attr("current_thread")().is(threading.attr("main_thread")());
}

}  // namespace

InterruptCheck interrupt_check(const py::object& also) {
  const bool signals = on_main_thread();
  if (!signals && also.is_none()) return {};
  // Borrowed: the caller keeps `also` alive for the call (None lives forever).
  const py::handle check = also;
  return [signals, check] {
    const py::gil_scoped_acquire gil;
    // A handler that raised leaves its exception set: error_already_set carries it
    // out of the call, and pybind11 raises it again in Python.
    if (signals && PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (!check.is_none()) check();
  };
}

}  // namespace ordo::python
