// Making a model directory: what a config.json's model is made of, and a weight file
// written a chunk at a time. For programs that make models, such as `ordo bench`'s
// random ones:
//
//   const ordo::ModelLayout layout = ordo::model_layout(config_text);
//   ordo::write_safetensors(dir / "model.safetensors", layout.tensors,
//                           [](const std::string& name, std::uint64_t first, std::span<float> out) {
//                             /* values [first, first + out.size()) of tensor `name` */ });
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ordo/export.hpp"

namespace ordo {

// One tensor of a weight file: its name as the file spells it, and its shape.
struct TensorShape {
  std::string name;
  std::vector<std::int64_t> shape;
};

// A config.json's model as ordo reads it.
struct ModelLayout {
  std::string family;             // "ordo" or "llama"
  bool decoder_only = false;
  int d_model = 0;
  int encoder_layers = 0;         // 0 for a decoder-only model
  int decoder_layers = 0;
  int attention_heads = 0;        // the decoder's query heads
  int key_value_heads = 0;        // its K/V heads (fewer: grouped-query attention)
  int ffn_dim = 0;                // the decoder's feed-forward width
  bool gated_ffn = false;         // SwiGLU-style (gate and up projections)
  int vocabulary_size = 0;        // the encoder's (a decoder-only model: the decoder's)
  std::vector<TensorShape> tensors;  // every tensor it requires, in the order ordo writes them
  std::int64_t parameters = 0;       // their elements
};

// The layout of the model `config_json` (config.json's text) describes; `source` names
// it in messages. Throws ordo::Error as loading a directory with that config.json would.
ORDO_API ModelLayout model_layout(std::string_view config_json, const std::string& source = "config.json");

// Puts values [first, first + out.size()) of tensor `name` into `out`.
using TensorFill = std::function<void(const std::string& name, std::uint64_t first, std::span<float> out)>;

// Writes `path`, a safetensors file of F32 tensors in the order given, asking `fill` for
// each tensor's values a chunk of at most 2^20 at a time, in order, so that a large
// model is never held in memory. Throws ordo::Error naming the file and the tensor (a
// repeated name, a negative dimension) or a write that failed.
ORDO_API void write_safetensors(const std::filesystem::path& path, const std::vector<TensorShape>& tensors,
                                const TensorFill& fill);

}  // namespace ordo
