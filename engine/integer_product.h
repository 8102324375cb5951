// Products of float32 activations with int8 and int4 weight matrices, computed in
// integers: each row of activations is quantized to int8 once per product, with one
// scale per group of the weight's group size (the row for int8 with one scale a row, as
// CTranslate2 does; 32 weights for int4, as llama.cpp's Q8_0 activations against Q4_0),
// and the products are exact sums of integer products. This is what makes quantized
// weights pay beyond the memory bandwidth: an int8 multiply-add instruction does the
// work of four (AVX2) to sixteen (AVX-512 VNNI) float ones, so batches, prefill and the
// encoder gain too, and the float work left is a few operations a group.
//
// The definition (every path gives exactly these numbers; the oracle computes them from
// this text, tools/oracle/ordo_torch/quantization.py). For an activation row x and a
// weight row w of cols weights in groups of G (G = cols for one scale a row):
//   per group g of x:  amax = max |x_k|;  s_g = amax / 127;
//                      q_k = x_k * (127 / amax) rounded to the nearest integer (halves
//                      to even), in [-127, 127];
//                      a group with amax below 2^-120 has q = 0 and s = 0; one with a
//                      non-finite value has q = 0 and s = NaN (the product is NaN).
//   c_g = s_g * w_scale_g, in float32; then, by format:
//   int8   per group g and lane l in 0..7: P[g][l] = the exact sum of q_k * w_k over the
//          k of the group with ((k - g G) mod 32) div 4 = l: the eight 32-bit lanes that
//          vector instructions fill, four adjacent products each;
//          t[g mod 2][l] = fma(float(P[g][l]), c_g, t[g mod 2][l]) for g in order, from
//          t = 0;  u[l] = t[0][l] + t[1][l];
//          y = ((u0 + u4) + (u2 + u6)) + ((u1 + u5) + (u3 + u7)), all in float32.
//   int4   per group g: P_g = the exact sum of q_k * (n_k - 8) over the group (n_k the
//          nibble);  t = fma(float(P_g), c_g, t) for g in order, from t = 0;  y = t.
//          One float step a group, as in llama.cpp's Q4_0 x Q8_0 dot product, so that
//          the panels of engine/int4_panels.h give 16 weight rows' steps in one vector
//          instruction. (|P_g| <= 8 x 127 x G: float(P_g) is exact for groups of fewer
//          than 16384 weights, and rounds to nearest beyond, on every path alike.)
// Integer sums have no order, and the float steps have one order for every path, batch
// size and thread count: a sequence's numbers never depend on the CPU or on what else
// is in its batch. Exact while |P| < 2^31: groups of at most kMaxIntegerGroup weights
// (models/quantize.cpp and the loader refuse wider ones).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/function_ref.h"
#include "engine/kernel_path.h"
#include "engine/tensor.h"
#include "engine/weight_matrix.h"

namespace ordo::kernels {

// The widest group whose lane sums fit an int32: 127 * 128 * G / 8 < 2^31.
inline constexpr Index kMaxIntegerGroup = Index{1} << 20;

// Rows of activations quantized for one product. Buffers grow to the largest product
// and are reused, so a decode step allocates nothing once warm.
class QuantizedActivations {
 public:
  // Quantizes every row of x in groups of `group` columns (a divisor of x.cols()).
  void quantize(ConstMatrixRef x, Index group);
  // quantize with the rows handed out by for_rows: it is called once, with the number of
  // rows and the work for a range of them [begin, end), and may run ranges at once on
  // several threads (engine/blas.cpp gives them to the pool). Rows are independent: the
  // same numbers however they are split.
  using RowRanges = FunctionRef<void(Index rows, FunctionRef<void(Index begin, Index end)> quantize_rows)>;
  void quantize(ConstMatrixRef x, Index group, RowRanges for_rows);
  // quantize with the given path's instructions (the same numbers on every path, and the
  // buffers that path's kernels read), so that tests can compare them. A path wider than
  // the CPU's runs the widest it has.
  void quantize_on(KernelPath path, ConstMatrixRef x, Index group);
  void quantize_on(KernelPath path, ConstMatrixRef x, Index group, RowRanges for_rows);

  Index rows() const { return rows_; }
  Index cols() const { return cols_; }
  Index group() const { return group_; }
  Index groups() const { return groups_; }
  // Row i's q, padded with zeros to a multiple of 64 columns.
  const std::int8_t* q(Index i) const { return q_.data() + i * stride_; }
  // Row i's q + 128 as unsigned bytes (the unsigned operand of VNNI's multiply-add).
  const std::uint8_t* q_unsigned(Index i) const { return q_unsigned_.data() + i * stride_; }
  // Row i's scales s_g.
  const float* scales(Index i) const { return scales_.data() + i * groups_; }
  // Row i's sums of q, a group each: int4's nibbles n carry +8, and P = sum of n q minus
  // 8 times these.
  const std::int32_t* sums(Index i) const { return sums_.data() + i * groups_; }
  // For AVX2's int8 batch tiles (four rows or more, groups of at least 128, quantized on
  // the AVX2 path), row i's q split as |q| and s = -1 where q < 0, and the correction
  // N[g * 8 + l] = the sum of |q| over lane l of group g's whole runs of 32 where q < 0:
  // |q| * (w ^ s) is q * w - |q| where q < 0, so P = lanes of |q| * (w ^ s) plus N.
  // Unset otherwise (sign_split() is false).
  bool sign_split() const { return sign_split_; }
  const std::uint8_t* magnitudes(Index i) const { return magnitudes_.data() + i * stride_; }
  const std::int8_t* signs(Index i) const { return signs_.data() + i * stride_; }
  const std::int32_t* negative_sums(Index i) const { return negative_sums_.data() + i * groups_ * 8; }

 private:
  void quantize_rows(ConstMatrixRef x, Index begin, Index end);
  void split_signs(Index i);

  Index rows_ = 0, cols_ = 0, group_ = 0, groups_ = 0, stride_ = 0;
  bool avx2_ = false;  // quantize_group_avx2 and the other AVX2 passes
  bool sign_split_ = false;
  std::vector<std::int8_t> q_;
  std::vector<std::uint8_t> q_unsigned_;
  std::vector<float> scales_;
  std::vector<std::int32_t> sums_;
  std::vector<std::uint8_t> magnitudes_;
  std::vector<std::int8_t> signs_;
  std::vector<std::int32_t> negative_sums_;
};

// Whether integer_product takes w: int8 or int4.
inline bool integer_product_takes(const WeightMatrix& w) {
  return w.format() == WeightFormat::Int8 || w.format() == WeightFormat::Int4;
}

// y[i, r - first] = the definition above, for every row i of a and the weight rows r in
// [first, first + count) of w; row i of y at y + i * y_stride. a was quantized with
// w.group(). Single-threaded: engine/blas.cpp splits the rows of w across threads.
void integer_product(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count, float* y,
                     Index y_stride);

// integer_product on the given path (engine/kernel_path.h), so that tests and
// benchmarks can compare paths in one process. Throws ordo::Error for a path wider than
// widest_kernel_path().
void integer_product_on(KernelPath path, const QuantizedActivations& a, const WeightMatrix& w, Index first,
                        Index count, float* y, Index y_stride);

}  // namespace ordo::kernels
