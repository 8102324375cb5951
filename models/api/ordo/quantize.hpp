// ordo::quantize_model: a model directory rewritten with its weight matrices in another
// format (README, "Quantized weights"): what `ordo quantize` runs.
//
//   ordo::QuantizeOptions options;
//   options.type = ordo::ComputeType::Int8;
//   ordo::quantize_model("weights/sinusoidal", "sinusoidal-int8", options);
//   auto model = ordo::Model::load("sinusoidal-int8");   // runs int8 as stored
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ordo/export.hpp"
#include "ordo/options.hpp"

namespace ordo {

struct QuantizeOptions {
  // f32, f16, bf16, int8 or int4 (auto names no format to write: OptionError, field "type").
  ComputeType type = ComputeType::Int8;
  // As LoadOptions::group_size: -1 the type's default (int8: a scale per row; int4: 32).
  int group_size = -1;
  // Asked between tensors (a tensor takes milliseconds): once it returns true, the pass
  // stops, removes what it wrote and throws ordo::Error. ordo quantize sets it on SIGINT
  // and SIGTERM. Empty: never stops.
  std::function<bool()> stop_requested;
};

struct QuantizeReport {
  std::uint64_t bytes_in = 0;   // the input's weight files
  std::uint64_t bytes_out = 0;  // the model.safetensors written
  int matrices = 0;             // weight matrices written in the new format
  // Of them, int4 matrices written as int8 with a scale per row instead: their width is
  // not a multiple of the group size (README, "Quantized weights"). 0 for other types.
  int int8_fallbacks = 0;
  int tensors = 0;              // tensors written (matrices, their scales, everything else as it was)
  // Weights per scale written (config.json's quantization.group_size: int8 0 for a scale
  // a row); -1 for the float types.
  int group_size = -1;
  std::vector<std::string> copied_files;  // the other files of the directory (tokenizer, generation config)
};

// Writes `output` (a new directory, or an existing empty one, which is filled and keeps its
// permissions, owner and any symbolic link to it) from the model
// directory `input`: config.json with its "quantization" key set (int8, int4) or removed,
// one model.safetensors with every weight matrix converted (exactly what
// LoadOptions::compute_type converts at load; for int4, int8 where a width is not a
// multiple of the group size) and every other tensor as it was, and the
// directory's other files copied. One tensor is held in memory at a time. The directory
// appears only once it is complete and loads (in an existing directory, config.json is
// the last file to arrive); a pass that fails or is stopped leaves nothing behind. Throws
// ordo::OptionError for bad options, ordo::Error for an input that does not load, an
// output that exists and is not empty, a model that cannot take the format (naming the
// tensor), a failed write (naming the output), or a stop.
ORDO_API QuantizeReport quantize_model(const std::filesystem::path& input, const std::filesystem::path& output,
                                       const QuantizeOptions& options = {});

}  // namespace ordo
