#include "engine/weight_matrix.h"

#include <cassert>
#include <vector>

#include "engine/quantized_matvec.h"

namespace ordo {

std::string_view weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::F32: return "f32";
    case WeightFormat::F16: return "f16";
    case WeightFormat::BF16: return "bf16";
    case WeightFormat::Int8: return "int8";
    case WeightFormat::Int4: return "int4";
  }
  return "?";
}

WeightMatrix::WeightMatrix(TensorView float32) : data_(float32.data()), float32_(std::move(float32)) {
  if (float32_.rank() == 2) {
    rows_ = float32_.dim(0);
    cols_ = float32_.dim(1);
  }
}

WeightMatrix WeightMatrix::half(WeightFormat format, const std::uint16_t* data, Index rows, Index cols) {
  assert(format == WeightFormat::F16 || format == WeightFormat::BF16);
  WeightMatrix w;
  w.format_ = format;
  w.data_ = data;
  w.rows_ = rows;
  w.cols_ = cols;
  return w;
}

WeightMatrix WeightMatrix::int8(const std::int8_t* q, const float* scales, Index rows, Index cols, Index group) {
  assert(group > 0 && cols % group == 0);
  WeightMatrix w;
  w.format_ = WeightFormat::Int8;
  w.data_ = q;
  w.scales_ = scales;
  w.rows_ = rows;
  w.cols_ = cols;
  w.group_ = group;
  return w;
}

WeightMatrix WeightMatrix::int4(const Int4PanelLayout& panels) {
  assert(panels.cols % kInt4Run == 0 && panels.group % kInt4Run == 0 && panels.cols % panels.group == 0);
  WeightMatrix w;
  w.format_ = WeightFormat::Int4;
  w.data_ = panels.start;
  w.rows_ = panels.rows;
  w.cols_ = panels.cols;
  w.group_ = panels.group;
  return w;
}

WeightMatrix WeightMatrix::int4_rows(const std::uint8_t* runs, const std::uint16_t* scales, Index rows, Index cols,
                                     Index group) {
  assert(cols % kInt4Run == 0 && group % kInt4Run == 0 && cols % group == 0 && scales != nullptr);
  WeightMatrix w;
  w.format_ = WeightFormat::Int4;
  w.data_ = runs;
  w.scales_ = scales;
  w.rows_ = rows;
  w.cols_ = cols;
  w.group_ = group;
  return w;
}

WeightMatrix WeightMatrix::read_by_row(WeightFormat format, const RowReader& values, const RowReader* scales,
                                       Index rows, Index cols, Index group) {
  const bool quantized = format == WeightFormat::Int8 || format == WeightFormat::Int4;
  assert(quantized == (scales != nullptr) && (!quantized || (group > 0 && cols % group == 0)));
  WeightMatrix w;
  w.format_ = format;
  w.values_reader_ = &values;
  w.scales_reader_ = scales;
  w.rows_ = rows;
  w.cols_ = cols;
  w.group_ = quantized ? group : 0;
  return w;
}

Int4PanelLayout WeightMatrix::int4_panels() const {
  assert(int4_in_panels());
  return {static_cast<const std::byte*>(data_), rows_, cols_, group_};
}

std::size_t WeightMatrix::bytes() const {
  if (int4_in_panels()) return int4_panels().bytes();
  return static_cast<std::size_t>(rows_) * (row_bytes() + row_scale_bytes());
}

ConstMatrixRef WeightMatrix::float32() const {
  assert(format_ == WeightFormat::F32);
  return {static_cast<const float*>(data_), rows_, cols_};
}

std::size_t WeightMatrix::row_bytes() const {
  const auto cols = static_cast<std::size_t>(cols_);
  switch (format_) {
    case WeightFormat::F32: return cols * 4;
    case WeightFormat::F16:
    case WeightFormat::BF16: return cols * 2;
    case WeightFormat::Int8: return cols;
    case WeightFormat::Int4: return cols / 2;
  }
  return 0;
}

std::size_t WeightMatrix::row_scale_bytes() const {
  const auto groups = static_cast<std::size_t>(groups_per_row());
  switch (format_) {
    case WeightFormat::Int8: return groups * sizeof(float);
    case WeightFormat::Int4: return groups * sizeof(std::uint16_t);
    default: return 0;
  }
}

WeightMatrix WeightMatrix::row_block(Index first, Index count) const {
  assert(first >= 0 && count >= 0 && first + count <= rows_ && !int4_in_panels() && !is_read_by_row());
  WeightMatrix block = *this;
  block.data_ = static_cast<const std::byte*>(data_) + static_cast<std::size_t>(first) * row_bytes();
  if (scales_ != nullptr)
    block.scales_ = static_cast<const std::byte*>(scales_) + static_cast<std::size_t>(first) * row_scale_bytes();
  block.rows_ = count;
  if (format_ == WeightFormat::F32) block.float32_ = TensorView(static_cast<const float*>(block.data_), {count, cols_});
  return block;
}

void WeightMatrix::dequantize(Index first, Index count, float* out, Index out_stride) const {
  if (!is_read_by_row()) return kernels::dequantize(*this, first, count, out, out_stride);
  // Each row read into memory, then dequantized as a one-row matrix of the same layout.
  // The buffers are the thread's, grown once: a decode step looks rows up every step
  // and allocates nothing (tests/test_no_alloc.cpp). operator new aligns them for float.
  thread_local std::vector<std::byte> values, scales;
  values.resize(row_bytes());
  scales.resize(row_scale_bytes());
  WeightMatrix row = *this;
  row.values_reader_ = row.scales_reader_ = nullptr;
  row.data_ = values.data();
  row.scales_ = scales_reader_ != nullptr ? scales.data() : nullptr;
  row.rows_ = 1;
  for (Index i = 0; i < count; ++i) {
    values_reader_->read_row(first + i, values);
    if (scales_reader_ != nullptr) scales_reader_->read_row(first + i, scales);
    kernels::dequantize(row, 0, 1, out + i * out_stride, out_stride);
  }
}

}  // namespace ordo
