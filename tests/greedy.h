// Greedy decoding of one source, as the tests call it: ordo::decode with beam 1.
#pragma once

#include <span>

#include "tests/search_support.h"

namespace ordo::testing_support {

inline Hypothesis greedy(const Transformer& model, std::span<const int> source, Index max_length = 0) {
  DecodingOptions options;
  options.max_length = max_length;
  return decode(model, source, options).front();
}

}  // namespace ordo::testing_support
