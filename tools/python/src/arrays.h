// C++ results -> NumPy arrays: the encoder's output without a second copy, and one
// layer's attention heads stacked.
#pragma once

#include <pybind11/numpy.h>

#include <string>

#include "ordo/ordo.hpp"
#include "results.h"

namespace ordo::python {

// The values of `output` as a float32 array [tokens, d_model] that owns them: the
// vector moves into the array's base object, nothing is copied.
py::array_t<float> encoder_array(EncoderOutput&& output);

// Layer `layer` of `kind` ("encoder", "decoder", "cross") from `attention`, its heads
// stacked [heads, rows, columns] (one copy) with the tokens of its rows and columns.
// Throws ordo::OptionError naming `kind` or `layer` when the model has no such one.
AttentionResult attention_layer(const Attention& attention, const std::string& kind, int layer);

}  // namespace ordo::python
