// Float32 views and buffers.
//
// Everything ordo computes is a matrix of float32, row-major. A MatrixSpan is a
// non-owning view whose rows may be strided (stride >= cols): that is what lets one
// attention head be the columns [h*dh, (h+1)*dh) of a [T, H*dh] projection and go
// straight to BLAS with lda = H*dh, without a transpose or a copy.
//
// Matrix owns its storage; resize() never shrinks capacity, so buffers sized once for
// the longest sequence are reused by every decoding step without allocating.
//
// TensorView is the weight side: an immutable, any-rank view over memory that someone
// else owns (a memory-mapped safetensors file, or a buffer converted from F16/BF16).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace ordo {

using Index = std::int64_t;
using Shape = std::vector<Index>;

// "[2, 3, 4]", for error messages.
std::string to_string(const Shape& shape);
Index element_count(const Shape& shape);

template <class T>  // T is float or const float
class MatrixSpan {
 public:
  MatrixSpan() = default;
  MatrixSpan(T* data, Index rows, Index cols) : MatrixSpan(data, rows, cols, cols) {}
  MatrixSpan(T* data, Index rows, Index cols, Index stride)
      : data_(data), rows_(rows), cols_(cols), stride_(stride) {
    assert(rows >= 0 && cols >= 0 && stride >= cols);
  }
  // A mutable view converts to a read-only one, never the other way.
  operator MatrixSpan<const T>() const { return {data_, rows_, cols_, stride_}; }

  T* data() const { return data_; }
  Index rows() const { return rows_; }
  Index cols() const { return cols_; }
  Index stride() const { return stride_; }
  bool contiguous() const { return stride_ == cols_ || rows_ <= 1; }
  bool empty() const { return rows_ == 0 || cols_ == 0; }

  T& operator()(Index r, Index c) const {
    assert(r >= 0 && r < rows_ && c >= 0 && c < cols_);
    return data_[r * stride_ + c];
  }
  std::span<T> row(Index r) const {
    assert(r >= 0 && r < rows_);
    return {data_ + r * stride_, static_cast<std::size_t>(cols_)};
  }
  void fill(float value) const
    requires(!std::is_const_v<T>)
  {
    for (Index r = 0; r < rows_; ++r)
      for (T& x : row(r)) x = value;
  }
  // Rows [first, first + count).
  MatrixSpan row_block(Index first, Index count) const {
    assert(first >= 0 && count >= 0 && first + count <= rows_);
    return {data_ + first * stride_, count, cols_, stride_};
  }
  // Columns [first, first + count), same rows: e.g. one attention head.
  MatrixSpan col_block(Index first, Index count) const {
    assert(first >= 0 && count >= 0 && first + count <= cols_);
    return {data_ + first, rows_, count, stride_};
  }

 private:
  T* data_ = nullptr;
  Index rows_ = 0;
  Index cols_ = 0;
  Index stride_ = 0;
};

using MatrixRef = MatrixSpan<float>;
using ConstMatrixRef = MatrixSpan<const float>;

// "[rows, cols]", for error messages.
std::string shape_of(ConstMatrixRef m);

// An owned, contiguous [rows, cols] float32 matrix.
class Matrix {
 public:
  Matrix() = default;
  Matrix(Index rows, Index cols) { resize(rows, cols); }

  // Changes the shape; contents are unspecified afterwards. Keeps capacity, so a
  // matrix reserved for the largest shape never reallocates.
  void resize(Index rows, Index cols) {
    assert(rows >= 0 && cols >= 0);
    rows_ = rows;
    cols_ = cols;
    if (static_cast<std::size_t>(rows * cols) > storage_.size())
      storage_.resize(static_cast<std::size_t>(rows * cols));
  }
  void reserve(Index elements) {
    if (static_cast<std::size_t>(elements) > storage_.size())
      storage_.resize(static_cast<std::size_t>(elements));
  }
  void fill(float value) { view().fill(value); }

  Index rows() const { return rows_; }
  Index cols() const { return cols_; }
  float* data() { return storage_.data(); }
  const float* data() const { return storage_.data(); }
  float& operator()(Index r, Index c) { return view()(r, c); }
  float operator()(Index r, Index c) const { return view()(r, c); }
  std::span<float> row(Index r) { return view().row(r); }
  std::span<const float> row(Index r) const { return view().row(r); }

  MatrixRef view() { return {storage_.data(), rows_, cols_}; }
  ConstMatrixRef view() const { return {storage_.data(), rows_, cols_}; }
  operator MatrixRef() { return view(); }
  operator ConstMatrixRef() const { return view(); }

 private:
  std::vector<float> storage_;
  Index rows_ = 0;
  Index cols_ = 0;
};

// An immutable float32 tensor of any rank over memory owned elsewhere (a weight).
class TensorView {
 public:
  TensorView() = default;
  TensorView(const float* data, Shape shape) : data_(data), shape_(std::move(shape)) {}

  const float* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  Index rank() const { return static_cast<Index>(shape_.size()); }
  Index dim(Index i) const { return shape_.at(static_cast<std::size_t>(i)); }
  Index size() const { return element_count(shape_); }
  bool empty() const { return data_ == nullptr; }

  // Rank 2 as a matrix; rank 1 as a vector. Asserted: callers bind shapes at load.
  ConstMatrixRef matrix() const {
    assert(rank() == 2);
    return {data_, shape_[0], shape_[1]};
  }
  std::span<const float> vector() const {
    return {data_, static_cast<std::size_t>(size())};
  }

 private:
  const float* data_ = nullptr;
  Shape shape_;
};

}  // namespace ordo
