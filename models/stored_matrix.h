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
// reads instead of the file goes into `copies`, which must outlive it. An int4 matrix
// comes back in the file's layout (WeightMatrix::int4_rows), which converts but does not
// multiply: arrange_int4 makes one that runs. A quantized or half-precision matrix only
// looked up reads its rows from the file (WeightMatrix::read_by_row), and the pages its
// checks read are released (SafetensorsFile::release).
WeightMatrix bind_stored_matrix(const TensorSpec& spec, StoredTensor values, StoredTensor scales,
                                const Quantization& quantization, MatrixCopies& copies);

// `stored`, an int4 matrix bind_stored_matrix bound from `values` and `scales`, arranged
// into the panels products read (engine/int4_panels.h), kept in `copies`; the file's
// pages go as its rows are arranged.
WeightMatrix arrange_int4(const WeightMatrix& stored, const StoredTensor& values, const StoredTensor& scales,
                          MatrixCopies& copies);

// Lets the file pages of rows [first, end) of `tensor` (`rows` rows) go: they have been
// read into another form (SafetensorsFile::release). Nothing for an empty StoredTensor.
void release_stored_rows(const StoredTensor& tensor, Index rows, Index first, Index end);

}  // namespace ordo
