// The one table of tensor names and shapes, Hugging Face BART/Marian style.
//
// expected_tensors(config) expands it for a config: every tensor the model needs (or
// may have), with its expected shape. Loading checks the file against this list, and
// the weight binding reads only names from it.
#pragma once

#include <string>
#include <vector>

#include "engine/tensor.h"
#include "models/config.h"

namespace ordo {

struct TensorSpec {
  std::string name;
  Shape shape;
  std::string shape_meaning;  // e.g. "[decoder_ffn_dim, d_model]", for error messages
  bool required = true;
};

std::vector<TensorSpec> expected_tensors(const ModelConfig& config);

// "model.encoder.layers.3." and "model.decoder.layers.3.".
std::string encoder_layer_prefix(Index layer);
std::string decoder_layer_prefix(Index layer);

}  // namespace ordo
