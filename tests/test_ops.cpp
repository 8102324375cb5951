// engine/ops against the double-precision oracles of tests/reference.h.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/error.h"
#include "engine/feed_forward.h"
#include "engine/ops.h"
#include "tests/reference.h"

namespace ordo {
namespace {

namespace ref = reference;
using ref::expect_close;
using ref::Matrix64;
using ref::expect_mentions;
using ref::expect_outside_unchanged;

constexpr float kInf = std::numeric_limits<float>::infinity();

TensorView vector_view(const std::vector<float>& v) {
  return {v.data(), {static_cast<Index>(v.size())}};
}
TensorView matrix_view(const Matrix& m) { return {m.data(), {m.rows(), m.cols()}}; }

// ---------------------------------------------------------------------------------------
// linear

// Oracle: reference::linear (double). Tolerance 1e-4 + 1e-5*|want|: float GEMM sums
// k = 48 products of inputs in [-1, 1]; the worst-case rounding bound is about
// k * 2^-24 * sum|x w| = 48 * 6e-8 * 12 = 3.5e-5, the typical error ~10x smaller.
TEST(Ops, LinearMatchesReferenceWithAndWithoutBias) {
  std::mt19937 rng(1);
  const Index T = 7, in = 48, out = 24;
  const Matrix x = ref::random_matrix(T, in, rng);
  const Matrix w = ref::random_matrix(out, in, rng);
  const std::vector<float> b = ref::random_vector(out, rng);

  Matrix y(T, out);
  ops::linear(x, Linear{matrix_view(w), {}}, y);
  expect_close(y, ref::linear(x, w), 1e-4, 1e-5);

  ops::linear(x, Linear{matrix_view(w), vector_view(b)}, y);
  expect_close(y, ref::linear(x, w, ref::to_double(b)), 1e-4, 1e-5);
}

// Same oracle and tolerance; input and output are col_blocks of wider matrices (as one
// head's slice of a fused projection), and the weight is a row block of a bigger one.
TEST(Ops, LinearOnStridedViews) {
  std::mt19937 rng(2);
  const Index T = 5, in = 32, out = 16;
  const Matrix x_wide = ref::random_matrix(T, in + 20, rng);
  const Matrix w = ref::random_matrix(out, in, rng);
  const std::vector<float> b = ref::random_vector(out, rng);
  Matrix y_wide = ref::random_matrix(T, out + 9, rng);
  const Matrix before = y_wide;

  const ConstMatrixRef x = x_wide.view().col_block(11, in);
  const MatrixRef y = y_wide.view().col_block(4, out);
  ops::linear(x, Linear{matrix_view(w), vector_view(b)}, y);
  expect_close(y, ref::linear(x, w, ref::to_double(b)), 1e-4, 1e-5);
  expect_outside_unchanged(y_wide, before, 4, out);
}

TEST(Ops, LinearShapeErrorsNameEveryShape) {
  Matrix x(3, 16), w(32, 8), y(3, 32), y_bad(3, 31);
  const std::vector<float> b(32), b_bad(31);
  expect_mentions(ref::error_message([&] { ops::linear(x, Linear{matrix_view(w), {}}, y); }),
                  {"linear", "[3, 16]", "[32, 8]", "16 features", "expects 8"});

  Matrix w_ok(32, 16);
  expect_mentions(
      ref::error_message([&] { ops::linear(x, Linear{matrix_view(w_ok), {}}, y_bad); }),
      {"linear", "[3, 16]", "[32, 16]", "[3, 31]", "[3, 32]"});
  expect_mentions(ref::error_message([&] {
                    ops::linear(x, Linear{matrix_view(w_ok), vector_view(b_bad)}, y);
                  }),
                  {"linear", "bias", "[31]", "[32, 16]", "[32]"});
  // A rank-1 "weight" is not a matrix.
  expect_mentions(
      ref::error_message([&] { ops::linear(x, Linear{vector_view(b), {}}, y); }),
      {"linear", "weight", "[32]"});
}

// ---------------------------------------------------------------------------------------
// layer_norm

// RMSNorm: oracle written here from its formula in double, y = x / sqrt(mean(x^2) +
// eps) * weight. Tolerance as layer_norm's: the engine accumulates in double.
TEST(Ops, RmsNormMatchesItsFormula) {
  std::mt19937 rng(4);
  const Index T = 5, d = 24;
  const float eps = 1e-6f;
  const Matrix x = ref::random_matrix(T, d, rng, -3.0f, 5.0f);
  const std::vector<float> gamma = ref::random_vector(d, rng, 0.5f, 1.5f);
  Matrix64 want(T, d);
  for (Index r = 0; r < T; ++r) {
    double squares = 0.0;
    for (Index j = 0; j < d; ++j) squares += static_cast<double>(x(r, j)) * x(r, j);
    const double rms = std::sqrt(squares / static_cast<double>(d) + eps);
    for (Index j = 0; j < d; ++j) want(r, j) = x(r, j) / rms * gamma[static_cast<std::size_t>(j)];
  }
  const NormWeights rms{vector_view(gamma), {}, NormKind::RmsNorm};
  Matrix y(T, d);
  ops::normalize(x, rms, eps, y);
  expect_close(y, want, 1e-5, 1e-5);
  Matrix in_place = x;
  ops::rms_norm(in_place, rms, eps, in_place);
  expect_close(in_place, want, 1e-5, 1e-5);
  // RMSNorm has no bias: one given is a bug in the caller, not something to ignore.
  expect_mentions(ref::error_message([&] { ops::rms_norm(x, {vector_view(gamma), vector_view(gamma), NormKind::RmsNorm}, eps, y); }),
                  {"rms_norm", "bias"});
}

// The gated feed-forward, down(silu(gate x) * up x), against the oracles' linear and
// silu in double. Tolerance as linear's: three float GEMMs of k <= 24.
TEST(Ops, GatedFeedForwardIsSwiGlu) {
  std::mt19937 rng(5);
  const Index T = 3, d = 8, ffn = 12;
  const Matrix x = ref::random_matrix(T, d, rng);
  const Matrix gate = ref::random_matrix(ffn, d, rng), up = ref::random_matrix(ffn, d, rng),
               down = ref::random_matrix(d, ffn, rng);
  const std::vector<float> gate_bias = ref::random_vector(ffn, rng);
  const FeedForward swiglu = FeedForward::gated({matrix_view(gate), vector_view(gate_bias)}, {matrix_view(up), {}},
                                                {matrix_view(down), {}}, Activation::Silu);
  FeedForwardScratch scratch;
  Matrix y(T, d);
  swiglu.forward(x, scratch, y);
  Matrix64 hidden = ref::map(ref::linear(x, gate, ref::to_double(gate_bias)), ref::silu);
  const Matrix64 upped = ref::linear(x, up);
  for (Index r = 0; r < T; ++r)
    for (Index j = 0; j < ffn; ++j) hidden(r, j) *= upped(r, j);
  expect_close(y, ref::linear(hidden, down), 1e-4, 1e-5);
  EXPECT_EQ(swiglu.kind(), FeedForwardKind::Gated);
}

// Oracle: reference::layer_norm (double). Tolerance 1e-5 + 1e-5*|want|: the engine
// accumulates in double, so the only error is rounding each output (|y| < ~10) to float.
TEST(Ops, LayerNormMatchesReference) {
  std::mt19937 rng(3);
  const Index T = 6, d = 40;
  const float eps = 1e-5f;
  const Matrix x = ref::random_matrix(T, d, rng, -3.0f, 5.0f);
  const std::vector<float> gamma = ref::random_vector(d, rng, 0.5f, 1.5f);
  const std::vector<float> beta = ref::random_vector(d, rng);
  const Matrix64 want = ref::layer_norm(x, ref::to_double(gamma), ref::to_double(beta), eps);

  Matrix y(T, d);
  ops::layer_norm(x, {vector_view(gamma), vector_view(beta)}, eps, y);
  expect_close(y, want, 1e-5, 1e-5);

  Matrix in_place = x;  // in place is allowed
  ops::layer_norm(in_place, {vector_view(gamma), vector_view(beta)}, eps, in_place);
  expect_close(in_place, want, 1e-5, 1e-5);

  // No bias: the oracle with an empty bias.
  ops::layer_norm(x, {vector_view(gamma), {}}, eps, y);
  expect_close(y, ref::layer_norm(x, ref::to_double(gamma), {}, eps), 1e-5, 1e-5);
}

// Catastrophic cancellation: rows are 1e4 + noise in [-1, 1]. float's spacing at 1e4 is
// ~1e-3, so E[x^2] - E[x]^2 in float (x^2 ~ 1e8, spacing 8) would lose the variance
// (~1/3) entirely. The oracle gets the same float-rounded inputs, so the tolerance
// stays the one of the test above: 1e-5 + 1e-5*|want|.
TEST(Ops, LayerNormLargeMeanOffset) {
  std::mt19937 rng(4);
  const Index T = 4, d = 256;
  const float eps = 1e-5f;
  Matrix x = ref::random_matrix(T, d, rng);
  for (Index r = 0; r < T; ++r)
    for (float& v : x.row(r)) v += 1e4f;
  std::vector<float> gamma(d, 1.0f), beta(d, 0.0f);

  Matrix y(T, d);
  ops::layer_norm(x, {vector_view(gamma), vector_view(beta)}, eps, y);
  expect_close(y, ref::layer_norm(x, ref::to_double(gamma), ref::to_double(beta), eps), 1e-5,
               1e-5);
}

// Same oracle and tolerance on a col_block, in place; neighbours untouched.
TEST(Ops, LayerNormOnStridedViewInPlace) {
  std::mt19937 rng(5);
  const Index T = 3, d = 24;
  Matrix wide = ref::random_matrix(T, d + 10, rng);
  const Matrix before = wide;
  const std::vector<float> gamma = ref::random_vector(d, rng);
  const std::vector<float> beta = ref::random_vector(d, rng);
  const MatrixRef x = wide.view().col_block(6, d);
  const Matrix64 want = ref::layer_norm(x, ref::to_double(gamma), ref::to_double(beta), 1e-6);

  ops::layer_norm(x, {vector_view(gamma), vector_view(beta)}, 1e-6f, x);
  expect_close(x, want, 1e-5, 1e-5);
  expect_outside_unchanged(wide, before, 6, d);
}

TEST(Ops, LayerNormShapeErrors) {
  Matrix x(2, 8), y(2, 8), y_bad(2, 9);
  const std::vector<float> ok(8), bad(7);
  expect_mentions(ref::error_message([&] {
                    ops::layer_norm(x, {vector_view(ok), vector_view(ok)}, 1e-5f, y_bad);
                  }),
                  {"layer_norm", "[2, 8]", "[2, 9]"});
  expect_mentions(ref::error_message([&] {
                    ops::layer_norm(x, {vector_view(bad), vector_view(ok)}, 1e-5f, y);
                  }),
                  {"layer_norm", "weight", "[7]", "[2, 8]", "[8]"});
  expect_mentions(ref::error_message([&] {
                    ops::layer_norm(x, {vector_view(ok), vector_view(bad)}, 1e-5f, y);
                  }),
                  {"layer_norm", "bias", "[7]", "[2, 8]"});
}

// ---------------------------------------------------------------------------------------
// softmax, log_softmax

// Oracle: reference::softmax_rows (double). Tolerance 1e-6 + 1e-5*|want|: outputs are
// in [0, 1]; float exp is within a few ulp and the 1/sum multiply adds one more.
TEST(Ops, SoftmaxMatchesReference) {
  std::mt19937 rng(6);
  Matrix wide = ref::random_matrix(5, 40, rng, -8.0f, 8.0f);
  const Matrix before = wide;
  const MatrixRef x = wide.view().col_block(3, 33);  // strided
  const Matrix64 want = ref::softmax_rows(x);
  ops::softmax_rows(x);
  expect_close(x, want, 1e-6, 1e-5);
  expect_outside_unchanged(wide, before, 3, 33);
}

// Same oracle and tolerance. exp(1e30) overflows without the max subtraction; -inf
// entries (masks) get exactly 0; an all -inf row becomes zeros, not NaN.
TEST(Ops, SoftmaxHugeValuesAndMasks) {
  Matrix x(5, 4);
  const float rows[5][4] = {{1e30f, 1e30f, 0.0f, -kInf},
                            {1e30f, -1e30f, 3.0f, 1e30f - 1e24f},
                            {-1e30f, -1e30f, -kInf, -kInf},
                            {-kInf, -kInf, -kInf, -kInf},
                            {-kInf, 2.0f, -kInf, -kInf}};
  for (Index r = 0; r < 5; ++r)
    for (Index c = 0; c < 4; ++c) x(r, c) = rows[r][c];
  const Matrix64 want = ref::softmax_rows(x);
  ops::softmax_rows(x);
  expect_close(x, want, 1e-6, 1e-5);
  // The closed forms, in case the oracle shares a blind spot.
  expect_close(x.row(0), std::vector<double>{0.5, 0.5, 0.0, 0.0}, 1e-6, 1e-5);
  expect_close(x.row(2), std::vector<double>{0.5, 0.5, 0.0, 0.0}, 1e-6, 1e-5);
  expect_close(x.row(3), std::vector<double>{0.0, 0.0, 0.0, 0.0}, 0.0, 0.0);
  expect_close(x.row(4), std::vector<double>{0.0, 1.0, 0.0, 0.0}, 0.0, 0.0);
}

// Oracle: reference::log_softmax_rows (double). Tolerance 1e-5 + 1e-6*|want|: values are
// x - max - log(sum); each term is within an ulp of |x - max| <= 16 (~1e-6).
TEST(Ops, LogSoftmaxMatchesReference) {
  std::mt19937 rng(7);
  Matrix x = ref::random_matrix(4, 100, rng, -8.0f, 8.0f);
  const Matrix64 want = ref::log_softmax_rows(x);
  ops::log_softmax_rows(x);
  expect_close(x, want, 1e-5, 1e-6);
}

// Same oracle and tolerance: no overflow at 1e30, -inf entries stay -inf, an all -inf
// row stays all -inf (the log of softmax's zeros), no NaN anywhere.
TEST(Ops, LogSoftmaxHugeValuesAndMasks) {
  Matrix x(3, 3);
  const float rows[3][3] = {{1e30f, 0.0f, -kInf}, {-kInf, -kInf, -kInf}, {1.0f, 1.0f, -kInf}};
  for (Index r = 0; r < 3; ++r)
    for (Index c = 0; c < 3; ++c) x(r, c) = rows[r][c];
  const Matrix64 want = ref::log_softmax_rows(x);
  ops::log_softmax_rows(x);
  expect_close(x, want, 1e-5, 1e-6);
  expect_close(x.row(0), std::vector<double>{0.0, -1e30, -kInf}, 1e-5, 1e-6);
  expect_close(x.row(1), std::vector<double>{-kInf, -kInf, -kInf}, 0.0, 0.0);
  expect_close(x.row(2), std::vector<double>{-std::log(2.0), -std::log(2.0), -kInf}, 1e-6,
               1e-6);
}

// ---------------------------------------------------------------------------------------
// activations

// gelu(1) = Phi(1) and gelu(-1) = -Phi(-1), exact to double. Tolerance 1e-7 + 1e-6*|want|:
// a few float ulps.
TEST(Ops, GeluKnownValues) {
  Matrix x(1, 3);
  x(0, 0) = 1.0f;
  x(0, 1) = -1.0f;
  x(0, 2) = 0.0f;
  ops::activate(Activation::Gelu, x);
  expect_close(x.row(0), std::vector<double>{0.8413447460685429, -0.15865525393145707, 0.0},
               1e-7, 1e-6);
}

// Oracle: reference::gelu/relu/silu (double) on x in [-10, 10] and a col_block view.
// relu: exact (0, 0). gelu, silu: 1e-6 + 1e-6*|want|, a few float ulps of |y| <= 10,
// plus the absolute slack for the far negative tail where y ~ 1e-23 .. 1e-6.
TEST(Ops, ActivationsMatchReference) {
  std::mt19937 rng(8);
  const Matrix source = ref::random_matrix(6, 50, rng, -10.0f, 10.0f);
  struct Case {
    Activation activation;
    double (*oracle)(double);
    double tolerance;
  };
  for (const Case& c : {Case{Activation::Relu, ref::relu, 0.0},
                        Case{Activation::Gelu, ref::gelu, 1e-6},
                        Case{Activation::Silu, ref::silu, 1e-6}}) {
    SCOPED_TRACE(static_cast<int>(c.activation));
    Matrix wide = source;
    const MatrixRef x = wide.view().col_block(5, 40);
    const Matrix64 want = ref::map(x, c.oracle);
    ops::activate(c.activation, x);
    expect_close(x, want, c.tolerance, c.tolerance);
    expect_outside_unchanged(wide, source, 5, 40);
  }
}

// Extreme inputs: no NaN, limits right. Tolerance as above.
TEST(Ops, ActivationsAtExtremes) {
  const std::vector<float> inputs = {-1e4f, -100.0f, -30.0f, 30.0f, 100.0f, 1e4f};
  for (Activation a : {Activation::Gelu, Activation::Silu}) {
    SCOPED_TRACE(static_cast<int>(a));
    Matrix x(1, static_cast<Index>(inputs.size()));
    std::copy(inputs.begin(), inputs.end(), x.row(0).begin());
    ops::activate(a, x);
    std::vector<double> want;
    for (float v : inputs) want.push_back(a == Activation::Gelu ? ref::gelu(v) : ref::silu(v));
    expect_close(x.row(0), want, 1e-6, 1e-6);
  }
}

// ---------------------------------------------------------------------------------------
// add, scale, add_row_vector, gather_rows: exact in float (one rounding per element,
// the same as the double oracle rounded), so tolerance 0 against float-exact sums.

TEST(Ops, AddScaleAddRowVectorOnStridedViews) {
  std::mt19937 rng(9);
  Matrix wide = ref::random_matrix(4, 20, rng);
  const Matrix before = wide;
  const Matrix x = ref::random_matrix(4, 12, rng);
  const std::vector<float> bias = ref::random_vector(12, rng);
  const MatrixRef y = wide.view().col_block(8, 12);

  ops::add(y, x);
  ops::scale(y, 0.5f);
  ops::add_row_vector(y, bias);
  Matrix64 want(4, 12);
  for (Index r = 0; r < 4; ++r)
    for (Index c = 0; c < 12; ++c)
      want(r, c) = (before(r, 8 + c) + x(r, c)) * 0.5f + bias[static_cast<std::size_t>(c)];
  expect_close(y, want, 0.0, 0.0);
  expect_outside_unchanged(wide, before, 8, 12);
}

TEST(Ops, GatherRowsCopiesRowsAndRejectsBadIds) {
  std::mt19937 rng(10);
  const Matrix values = ref::random_matrix(10, 6, rng);
  const ConstMatrixRef table = values.view();
  const WeightMatrix weights(TensorView(values.data(), {10, 6}));
  const std::vector<int> ids = {3, 0, 9, 3};
  Matrix y(4, 6);
  ops::gather_rows(weights, ids, y);
  for (Index r = 0; r < 4; ++r)
    expect_close(y.row(r), ref::to_double(table.row(ids[static_cast<std::size_t>(r)])), 0.0,
                 0.0);

  const std::vector<int> bad = {1, 2, 10, 0};
  expect_mentions(ref::error_message([&] { ops::gather_rows(weights, bad, y); }),
                  {"gather_rows", "id 10", "position 2", "10 rows"});
  const std::vector<int> negative = {-1, 0, 0, 0};
  expect_mentions(ref::error_message([&] { ops::gather_rows(weights, negative, y); }),
                  {"id -1", "position 0"});
  Matrix y_bad(3, 6);
  expect_mentions(ref::error_message([&] { ops::gather_rows(weights, ids, y_bad); }),
                  {"gather_rows", "[10, 6]", "4 ids", "[3, 6]", "[4, 6]"});
}

TEST(Ops, ElementwiseShapeErrors) {
  Matrix a(2, 3), b(3, 2);
  expect_mentions(ref::error_message([&] { ops::add(a, b); }), {"add", "[2, 3]", "[3, 2]"});
  const std::vector<float> bias(4);
  expect_mentions(ref::error_message([&] { ops::add_row_vector(a, bias); }),
                  {"add_row_vector", "[4]", "[2, 3]"});
}

}  // namespace
}  // namespace ordo
