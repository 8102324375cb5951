// Float weights into a stored format (engine/weight_matrix.h): F16, BF16, int8 or int4
// with their scales. `ordo quantize` writes what this makes, and --compute-type makes
// it at load, so the two give bit-identical weights.
//
// Symmetric, per group of a row (the whole row when the group is 0 for int8; int4
// falls back to that int8 on a width its group does not divide):
//   int8  scale = max|w| / 127 (F32), q = round(w / scale) in [-127, 127]
//   int4  scale = max|w| / 7 rounded to F16, q = round(w / scale) in [-8, 7]
// rounding half to even; an all-zero group gets scale 1 (any positive scale is exact).
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/function_ref.h"
#include "engine/weight_matrix.h"
#include "models/quantization_config.h"
#include "models/safetensors.h"

namespace ordo {

// A matrix in a stored format, owning its bytes as the file holds them.
struct EncodedMatrix {
  WeightFormat format = WeightFormat::F32;
  Index rows = 0;
  Index cols = 0;
  Index group = 0;  // weights per scale (quantized formats)
  std::vector<std::byte> values;
  std::vector<std::byte> scales;  // empty for float formats
  // int4: the panels the products read (engine/int4_panels.h), arranged by the first view().
  mutable std::optional<Int4Panels> panels;

  WeightMatrix view() const;
  // view(), for a matrix that only runs (never written): int4 then frees its stored
  // layout, keeping the panels alone; for one only looked up a row at a time
  // (TensorSpec::lookup_only), int4 stays in the stored layout and makes no panels.
  WeightMatrix view_to_run(bool lookup_only);
  // How a safetensors file holds them: the values tensor's dtype and shape, and the
  // scales tensor's (the weight's name + "_scale").
  DType values_dtype() const;
  Shape values_shape() const;
  DType scales_dtype() const;
  Shape scales_shape() const;
};

// The largest int8 scale: its weights q x scale, |q| <= 128 (a stored -128 is read too),
// stay within float32's range. max|w| / 127 is larger only for weights within 1/128 of
// float32's largest value; the encoder refuses those and the loader such scales.
inline constexpr float kMaxInt8Scale = std::numeric_limits<float>::max() / 128;

// A float as the shortest text that reads back to it ("2.6792e+36", "-1e-45"), for
// messages: std::to_string would print a tiny scale as "0.000000".
std::string shortest_text(float value);

// The name of a quantized weight's scales: "NAME_scale" ("...q_proj.weight_scale").
std::string scale_tensor_name(const std::string& weight_name);

// `w` (any format) as `target` says: its type (F32, F16, BF16, Int8, Int4) and group
// size (0: int8's per-row scale), except that int4 on a width its group size does not
// divide gives int8 with a scale per row (Quantization::stored_as; the result's
// `format` says which). Throws Error naming `name` and the rule when the matrix cannot
// take the format: an int4 group that is not a multiple of 32, an int8 group that does
// not divide the width, a value beyond F16's range (an int4 scale or an F16 weight), an
// int8 scale beyond kMaxInt8Scale. Rows encode on every thread; each calls
// rows_done(first, end) as it finishes a stretch of rows, which then are read no more
// (a loader lets their file pages go).
EncodedMatrix encode_matrix(const WeightMatrix& w, const Quantization& target, const std::string& name,
                            FunctionRef<void(Index first, Index end)> rows_done = [](Index, Index) {});

}  // namespace ordo
