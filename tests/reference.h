// Test oracles and comparison helpers.
//
// The oracles are naive double-precision implementations written from the textbook
// formulas with plain loops. They share nothing with engine/ but the enums that name a
// variant (SinusoidalLayout, RopeLayout, ...), so an engine bug cannot hide in both.
// Infinities follow the engine's documented conventions (a fully masked softmax row is
// all zeros), so a test can feed -inf masks to both.
//
// Typical use:
//   std::mt19937 rng(7);
//   Matrix x = reference::random_matrix(5, 16, rng);
//   ... engine op on x into y ...
//   // Oracle: reference::linear (double). Tolerance: 1e-4 + 1e-5*|want| (float sum, k=16).
//   reference::expect_close(y, reference::linear(x, w), 1e-4, 1e-5);
#pragma once

#include <concepts>
#include <functional>
#include <initializer_list>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/positions.h"
#include "engine/tensor.h"

namespace ordo::reference {

// ---------------------------------------------------------------------------------------
// A row-major [rows, cols] matrix of doubles.
class Matrix64 {
 public:
  Matrix64() = default;
  Matrix64(Index rows, Index cols, double value = 0.0);
  Matrix64(Index rows, Index cols, std::vector<double> values);  // values.size() == rows*cols
  // An exact copy of a float view (any stride). Implicit, so that MatrixRef,
  // ConstMatrixRef and ordo::Matrix go straight into the oracles and expect_close.
  Matrix64(ConstMatrixRef m);  // NOLINT(google-explicit-constructor)
  template <class M>
    requires(std::convertible_to<const M&, ConstMatrixRef> &&
             !std::same_as<M, ConstMatrixRef>)
  Matrix64(const M& m) : Matrix64(static_cast<ConstMatrixRef>(m)) {}  // NOLINT

  Index rows() const { return rows_; }
  Index cols() const { return cols_; }
  double& operator()(Index r, Index c) { return values_[index(r, c)]; }
  double operator()(Index r, Index c) const { return values_[index(r, c)]; }
  std::span<double> row(Index r) { return {values_.data() + r * cols_, size(cols_)}; }
  std::span<const double> row(Index r) const {
    return {values_.data() + r * cols_, size(cols_)};
  }
  std::span<const double> values() const { return values_; }  // row-major, rows*cols

 private:
  static std::size_t size(Index n) { return static_cast<std::size_t>(n); }
  std::size_t index(Index r, Index c) const;  // asserts bounds
  Index rows_ = 0;
  Index cols_ = 0;
  std::vector<double> values_;
};

std::vector<double> to_double(std::span<const float> v);

// ---------------------------------------------------------------------------------------
// Oracles. Shapes as in the engine: weights [out, in], activations [T, features].

// a [m,k] x b [k,n] -> [m,n]
Matrix64 matmul(const Matrix64& a, const Matrix64& b);
// a [m,k] x b^T, b given as [n,k] -> [m,n]
Matrix64 matmul_nt(const Matrix64& a, const Matrix64& b);
// x [T,in] x weight^T ([out,in]) + bias [out] (empty: none) -> [T,out]
Matrix64 linear(const Matrix64& x, const Matrix64& weight, std::span<const double> bias = {});
// Row-wise (x - mean) / sqrt(var + eps) * weight + bias, var biased (divided by d).
// bias may be empty (none).
Matrix64 layer_norm(const Matrix64& x, std::span<const double> weight,
                    std::span<const double> bias, double eps);
// Row-wise exp(x_j) / sum_k exp(x_k); an all -inf row gives zeros.
Matrix64 softmax_rows(const Matrix64& x);
// Row-wise log(softmax); an all -inf row stays all -inf.
Matrix64 log_softmax_rows(const Matrix64& x);

double relu(double x);  // max(0, x)
double gelu(double x);  // 0.5 x (1 + erf(x / sqrt 2))
double silu(double x);  // x / (1 + exp(-x))
Matrix64 map(const Matrix64& x, const std::function<double(double)>& f);  // elementwise

// w_i for i in [0, dim/2): Vaswani 10000^(-2i/dim); Tensor2Tensor
// exp(-i ln(10000) / (dim/2 - 1)).
std::vector<double> sinusoidal_frequencies(Index dim, SinusoidalFrequencies kind);
// Row t = the sinusoidal vector of position first_position + t, [count, dim].
Matrix64 sinusoidal_table(Index first_position, Index count, Index dim, SinusoidalLayout layout,
                          SinusoidalFrequencies kind);
// RoPE on x [T, heads*head_dim], row t at position first_position + t, written in the
// cos/sin-vector form of the reference code bases (not the engine's pair loop):
//   Half (HF LLaMA):      out = x*cos + rotate_half(x)*sin,  rotate_half = [-x2, x1]
//   Interleaved (GPT-J):  out = x*cos + rotate_every_two(x)*sin, [-x1, x0, -x3, x2, ...]
// with frequencies theta^(-2i/head_dim).
Matrix64 rope(const Matrix64& x, Index head_dim, double theta, RopeLayout layout,
              Index first_position);

// ---------------------------------------------------------------------------------------
// Comparison. An element passes when |got - want| <= atol + rtol*|want|; infinities pass
// only against the same infinity, NaN only against NaN. On failure the message gives
// the number of bad elements, the first bad index (unravelled by `shape`: [h, i, j]),
// got, want and the largest |diff|.

::testing::AssertionResult all_close(std::span<const double> got, std::span<const double> want,
                                     const Shape& shape, double atol, double rtol);
::testing::AssertionResult all_close(const Matrix64& got, const Matrix64& want, double atol,
                                     double rtol);
::testing::AssertionResult all_close(std::span<const float> got, std::span<const double> want,
                                     double atol, double rtol);

// Where a helper was called from, so that it reports failures at the caller's line.
// std::source_location would say it, but clang 14 with libstdc++ 12 lacks the builtin
// that needs (the suite did not compile with clang); these two builtins, as default
// arguments, name the call site on GCC and clang alike.
struct CallSite {
  static constexpr CallSite here(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return {file, line};
  }
  const char* file;
  int line;
};

// EXPECT_TRUE(all_close(...)), reported at the caller's line.
void expect_close(const Matrix64& got, const Matrix64& want, double atol, double rtol,
                  CallSite where = CallSite::here());
void expect_close(std::span<const float> got, std::span<const double> want, double atol,
                  double rtol, CallSite where = CallSite::here());

// Expects `text` to contain every one of `parts` (an error message names what it must).
void expect_mentions(const std::string& text, std::initializer_list<const char*> parts);

// Every element of `wide` outside columns [first, first+count) equals `before`: an op
// on a col_block view must not touch its neighbours.
void expect_outside_unchanged(const Matrix& wide, const Matrix& before, Index first, Index count);

// Runs f; returns the message of the ordo::Error it throws. Fails the test (at the
// caller's line) and returns "" when f throws nothing. Other exceptions propagate.
std::string error_message(const std::function<void()>& f, CallSite where = CallSite::here());

// ---------------------------------------------------------------------------------------
// Random inputs, uniform in [lo, hi). Deterministic for a given std::mt19937 seed.
Matrix random_matrix(Index rows, Index cols, std::mt19937& rng, float lo = -1.0f,
                     float hi = 1.0f);
std::vector<float> random_vector(Index n, std::mt19937& rng, float lo = -1.0f,
                                 float hi = 1.0f);

}  // namespace ordo::reference
