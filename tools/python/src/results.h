// The two results the bindings make themselves (the others are the C++ API's own
// structs, bound as they are in results.cpp): a tokenized text, and one layer's
// attention as a NumPy array.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

namespace ordo::python {

namespace py = pybind11;

// A text as the model reads it: ids and their pieces, one per id.
struct Tokens {
  std::vector<int> ids;
  std::vector<std::string> pieces;
};

// One layer's attention probabilities, every head: weights [heads, rows, columns]
// (float32), rows the query tokens, columns the key tokens.
struct AttentionResult {
  std::string kind;  // "encoder", "decoder" or "cross"
  int layer = 0;
  py::array_t<float> weights;
  std::vector<std::string> rows;
  std::vector<std::string> columns;
};

}  // namespace ordo::python
