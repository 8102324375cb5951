// A weight matrix [rows, cols] in the format it is stored in: float32, half precision
// (F16, BF16), or quantized (int8, int4 with scales). Like TensorView it only views
// memory someone else owns (the memory-mapped file, or a buffer converted at load).
//
// At batch 1 a decode step reads every weight once, so its speed is the bytes per weight:
// 4 for float32, 2 for F16/BF16, 1 for int8, 0.5 for int4 (plus the scales). The kernels
// (engine/quantized_matvec.h) convert to float32 in registers; nothing is expanded in
// memory. Activations stay float32: a quantized product equals, to float rounding, the
// float product with the dequantized weights.
//
// The layouts (README, "Quantized weights"), w[r, k] being the weight as float:
//   F16, BF16  [rows, cols] of 16-bit values, row-major.
//   Int8       q [rows, cols] int8; scales [rows, cols / group] float32;
//              w[r, k] = q[r, k] * scales[r, k / group] (group = cols: one scale a row).
//   Int4       nibbles n = q + 8 (0..15) and F16 scales, arranged into panels of 16 rows
//              (engine/int4_panels.h; files store runs of 32 a row, and the loader
//              arranges them); w[r, k] = (n - 8) * scale[r, k / group]. cols and group
//              are multiples of 32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "engine/int4_panels.h"
#include "engine/tensor.h"

namespace ordo {

enum class WeightFormat : std::uint8_t { F32, F16, BF16, Int8, Int4 };

// "f32", "f16", "bf16", "int8", "int4": the names of --compute-type and `ordo quantize --type`.
std::string_view weight_format_name(WeightFormat format);

// Int4 weights are packed in runs of this many (16 bytes).
inline constexpr Index kInt4Run = 32;

// One stored tensor's rows, read on request from outside the process's memory (a file,
// read a row at a time: models/safetensors.h makes these). For a matrix that is only
// looked up, a token embedding: a step needs a few of its rows, and mapping its file
// would let the kernel map far more (Linux 6.18 maps a page cache folio whole, up to
// 2 MB, on one touch).
class RowReader {
 public:
  virtual ~RowReader() = default;
  // Row `row`'s bytes into `out`, which holds one row. Throws Error when they cannot
  // be read (the file shrank, an I/O error).
  virtual void read_row(Index row, std::span<std::byte> out) const = 0;
};

class WeightMatrix {
 public:
  WeightMatrix() = default;
  // A float32 weight; rank 2 is checked by the op that uses it (ops::linear).
  WeightMatrix(TensorView float32);  // NOLINT: implicit, every float weight is one

  static WeightMatrix half(WeightFormat format, const std::uint16_t* data, Index rows, Index cols);
  static WeightMatrix int8(const std::int8_t* q, const float* scales, Index rows, Index cols, Index group);
  // Int4 weights arranged into panels (Int4Panels::view makes these).
  static WeightMatrix int4(const Int4PanelLayout& panels);
  // Int4 weights in the file's layout (runs of 32 a row, F16 scales [rows, cols / group]),
  // for a matrix only read a row at a time (dequantize): products need panels, and
  // refuse these.
  static WeightMatrix int4_rows(const std::uint8_t* runs, const std::uint16_t* scales, Index rows, Index cols,
                                Index group);
  // A matrix only looked up, stored as `format` lays a row out (int4: the file's runs of
  // 32), whose rows dequantize() reads from `values` and, for int8 and int4, `scales`:
  // its bytes are never in memory. The readers must outlive it. Products refuse it.
  static WeightMatrix read_by_row(WeightFormat format, const RowReader& values, const RowReader* scales, Index rows,
                                  Index cols, Index group);

  WeightFormat format() const { return format_; }
  bool is_float32() const { return format_ == WeightFormat::F32; }
  bool empty() const { return data_ == nullptr && values_reader_ == nullptr; }
  Index rows() const { return rows_; }
  Index cols() const { return cols_; }
  // Weights per scale along a row (quantized formats); cols for one scale a row.
  Index group() const { return group_; }
  Index groups_per_row() const { return group_ == 0 ? 0 : cols_ / group_; }
  // The float32 tensor as bound (any rank; for shape checks and messages).
  const TensorView& float32_tensor() const { return float32_; }
  // The float32 weight as a matrix. Float32 only (asserted).
  ConstMatrixRef float32() const;

  const void* data() const { return data_; }
  const void* scales() const { return scales_; }

  // Bytes of one row's values, and of one row's scales (int4: as a file stores them).
  std::size_t row_bytes() const;
  std::size_t row_scale_bytes() const;
  // What one pass over the whole matrix reads: values and scales (int4: its panels,
  // padded to whole panels of 16 rows).
  std::size_t bytes() const;

  // Row r's stored values and its scales, as T: the format's element type (float,
  // std::uint16_t, std::int8_t; float for int8's scales, std::uint8_t and std::uint16_t
  // for int4 in the file's layout). Not for int4 in panels, whose rows are woven
  // together: int4_panels() says where its weights are.
  template <class T>
  const T* row(Index r) const {
    return reinterpret_cast<const T*>(static_cast<const std::byte*>(data_) + static_cast<std::size_t>(r) * row_bytes());
  }
  template <class T>
  const T* row_scales(Index r) const {
    return reinterpret_cast<const T*>(static_cast<const std::byte*>(scales_) +
                                      static_cast<std::size_t>(r) * row_scale_bytes());
  }

  // Int4's panels (int4 in panels only, asserted), and whether an int4 matrix is in them.
  Int4PanelLayout int4_panels() const;
  bool int4_in_panels() const { return format_ == WeightFormat::Int4 && data_ != nullptr && scales_ == nullptr; }
  // Whether rows are read on request (read_by_row): data() and row() are then null.
  bool is_read_by_row() const { return values_reader_ != nullptr; }

  // Rows [first, first + count), in the same format. Not for int4 in panels, nor a
  // matrix read by row.
  WeightMatrix row_block(Index first, Index count) const;

  // Rows [first, first + count) as float32 into out (row i at out + i * out_stride).
  void dequantize(Index first, Index count, float* out, Index out_stride) const;

 private:
  WeightFormat format_ = WeightFormat::F32;
  const void* data_ = nullptr;
  const void* scales_ = nullptr;
  Index rows_ = 0;
  Index cols_ = 0;
  Index group_ = 0;
  TensorView float32_;
  const RowReader* values_reader_ = nullptr;  // read_by_row()
  const RowReader* scales_reader_ = nullptr;
};

}  // namespace ordo
