// ordo.Error (a RuntimeError) and ordo.OptionError (an Error and a ValueError), and the
// translation of the C++ exceptions into them. A C++ option field is named by its
// Python keyword, so that the message names what the caller typed (num_hypotheses,
// not n_best).
#include <pybind11/pybind11.h>

#include <exception>

#include "bindings.h"
#include "options.h"

namespace ordo::python {

namespace {

// The exception types; created once at import and owned by the module from then on.
PyObject* error_type = nullptr;
PyObject* option_error_type = nullptr;

// Raises ordo.OptionError("<keyword>: <problem>") with .keyword set.
void set_option_error(const std::string& keyword, const std::string& problem) {
  const std::string message = keyword + ": " + problem;
  py::object error = py::reinterpret_steal<py::object>(PyObject_CallFunction(option_error_type, "s", message.c_str()));
  if (!error) return;  // the call set its own exception
  error.attr("keyword") = keyword;
  PyErr_SetObject(option_error_type, error.ptr());
}

}  // namespace

void throw_option_error(const std::string& keyword, const std::string& problem) {
  throw ordo::OptionError(keyword, problem);
}

void bind_errors(py::module_& m) {
  error_type = PyErr_NewExceptionWithDoc(
      "ordo.Error",
      "Anything ordo cannot do with what it was given: a bad file, text, option or model.\n\n"
      "The message is the C++ library's: what went wrong, where (a file, a tensor, a config key) and what to do.",
      PyExc_RuntimeError, nullptr);
  if (error_type == nullptr) throw py::error_already_set();
  m.attr("Error") = py::reinterpret_borrow<py::object>(error_type);
  py::tuple bases = py::make_tuple(py::reinterpret_borrow<py::object>(error_type),
                                   py::reinterpret_borrow<py::object>(PyExc_ValueError));
  option_error_type = PyErr_NewExceptionWithDoc(
      "ordo.OptionError",
      "A keyword argument with a value ordo cannot take. The message starts with the keyword "
      "(\"num_hypotheses: ...\"), which is also the exception's .keyword attribute.",
      bases.ptr(), nullptr);
  if (option_error_type == nullptr) throw py::error_already_set();
  m.attr("OptionError") = py::reinterpret_borrow<py::object>(option_error_type);

  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const ordo::OptionError& e) {
      set_option_error(keyword_for(e.field()), e.problem());
    } catch (const ordo::Error& e) {
      PyErr_SetString(error_type, e.what());
    }
  });
}

}  // namespace ordo::python
