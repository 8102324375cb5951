// ordo._ordo: the compiled half of `import ordo` (the Python half, tools/python/ordo/,
// gives it keyword signatures and documentation).
#include "bindings.h"

PYBIND11_MODULE(_ordo, m) {
  namespace python = ordo::python;
  m.doc() = "ordo's compiled core: the public C++ API (<ordo/ordo.hpp>) for Python. Use it through `import ordo`.";
  python::bind_errors(m);
  python::bind_results(m);
  python::bind_models(m);
  python::bind_translator(m);
  python::bind_generator(m);
}
