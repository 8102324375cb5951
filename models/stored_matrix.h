// A weight matrix bound as its file stores it (engine/weight_matrix.h): F32, F16 or BF16
// kept as stored (memory-mapped), or int8 / int4 values with their "NAME_scale" tensor.
// Quantized formats are an allowlist: the values' dtype, both shapes, the group size,
// and every scale (finite, > 0) are checked before a kernel reads a byte, and each
// failure names the tensor and the rule.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
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

// What bound matrices read instead of their files' mapped bytes, kept as long as they
// are: stored bytes that had to be copied to be read (an F16 tensor at an odd address),
// int4 matrices arranged into the panels their products read (engine/int4_panels.h),
// and the readers of matrices only looked up (TensorSpec::lookup_only), which read
// their rows from the file on request.
struct MatrixCopies {
  std::vector<std::vector<std::byte>> bytes;
  std::deque<Int4Panels> int4;  // a deque: adding one never moves the others
  std::vector<std::unique_ptr<RowReader>> readers;  // of matrices read a row at a time
};

// `values` is the tensor of `spec` (a matrix); `scales` its scale tensor, or an empty
// StoredTensor when the file has none. `quantization` is config.json's. What the matrix
// reads instead of the file goes into `copies`, which must outlive it; the file pages of
// an arranged int4 matrix are then released (SafetensorsFile::release), and so are those
// of a quantized or half-precision matrix only looked up, once checked: it reads its
// rows from the file (WeightMatrix::read_by_row).
WeightMatrix bind_stored_matrix(const TensorSpec& spec, StoredTensor values, StoredTensor scales,
                                const Quantization& quantization, MatrixCopies& copies);

}  // namespace ordo
