// A weight matrix bound as its file stores it (engine/weight_matrix.h): F32, F16 or BF16
// kept as stored (memory-mapped), or int8 / int4 values with their "NAME_scale" tensor.
// Quantized formats are an allowlist: the values' dtype, both shapes, the group size,
// and every scale (finite, > 0) are checked before a kernel reads a byte, and each
// failure names the tensor and the rule.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "engine/weight_matrix.h"
#include "models/quantization_config.h"
#include "models/safetensors.h"
#include "models/tensor_names.h"

namespace ordo {

struct StoredTensor {
  const SafetensorsFile* file = nullptr;
  const TensorInfo* info = nullptr;
};

// `values` is the tensor of `spec` (a matrix); `scales` its scale tensor, or an empty
// StoredTensor when the file has none. `quantization` is config.json's. Values that
// must be copied to be read (an F16 tensor at an odd address) go into `copies`, whose
// buffers must outlive the matrix.
WeightMatrix bind_stored_matrix(const TensorSpec& spec, StoredTensor values, StoredTensor scales,
                                const Quantization& quantization, std::vector<std::vector<std::byte>>& copies);

}  // namespace ordo
