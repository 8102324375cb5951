// config.json's `quantization`: how the file stores its weight matrices when they are
// quantized (README, "Quantized weights"), for every family:
//
//   absent or null                       no quantized tensor (F32, F16 and BF16 tensors
//                                        say what they are by their dtype)
//   {"type": "int8", "group_size": 0}    I8 values, F32 scales; group_size 0: one scale
//                                        per row, else per group_size weights of a row
//   {"type": "int4", "group_size": 32}   packed U8 values, F16 scales; group_size a
//                                        multiple of 32 [32]; a matrix whose width
//                                        group_size does not divide is int8 with one
//                                        scale per row instead (stored_as)
//
// A key it does not have is refused by name, as an unknown type is: ignoring one could
// read the weights wrongly. Whether group_size fits each tensor is checked where the
// tensor is bound (models/stored_matrix.h).
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "engine/weight_matrix.h"
#include "models/config_reader.h"

namespace ordo {

struct Quantization {
  WeightFormat type = WeightFormat::F32;  // Int8 or Int4 when quantized; F32 otherwise
  Index group_size = 0;                   // 0: a scale per row (int8 only)

  bool enabled() const { return type == WeightFormat::Int8 || type == WeightFormat::Int4; }
  // The weights per scale for a row of `cols` weights.
  Index group_for(Index cols) const { return group_size == 0 ? cols : group_size; }

  // How a matrix with rows of `cols` weights is stored under this quantization: as it
  // says, except int4 on a width that group_size does not divide (and so int4 cannot
  // pack: its groups are whole runs of 32): int8 with one scale per row, llama.cpp's
  // fallback to a wider type for a tensor its blocks do not fit. The rule is exact both
  // ways: an int4 file holds int8 exactly where this says so (models/stored_matrix.cpp).
  Quantization stored_as(Index cols) const {
    if (type == WeightFormat::Int4 && (group_size <= 0 || cols % group_size != 0)) return {WeightFormat::Int8, 0};
    return *this;
  }
};

// The default group of a format: int8 a scale per row, int4 32 weights (llama.cpp's Q4_0).
Index default_group_size(WeightFormat type);

// Reads `quantization` of the config object `keys` reads. Throws Error naming
// `quantization.<key>`.
Quantization read_quantization(const config_reader::KeyReader& keys);

// The value config.json holds for `quantization` (null when none).
nlohmann::json quantization_json(const Quantization& quantization);

// "int8, one scale per row", "int4, groups of 32": for ordo inspect and messages.
std::string describe(const Quantization& quantization);

}  // namespace ordo
