// engine/positions: closed forms, the reference oracles, and the properties that make
// each scheme a position encoding at all ("seed claims"):
//   sinusoidal: PE(pos + k) = M_k PE(pos) for one fixed linear map M_k and every pos;
//   rope: <R_m q, R_n k> depends only on m - n, and each head keeps its norm.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/error.h"
#include "engine/positions.h"
#include "tests/reference.h"

namespace ordo {
namespace {

namespace ref = reference;
using ref::expect_close;
using ref::Matrix64;
using ref::expect_mentions;
using ref::expect_outside_unchanged;

const char* name(SinusoidalLayout layout) {
  return layout == SinusoidalLayout::Interleaved ? "interleaved" : "split";
}
const char* name(SinusoidalFrequencies kind) {
  return kind == SinusoidalFrequencies::Vaswani ? "vaswani" : "tensor2tensor";
}
const char* name(RopeLayout layout) {
  return layout == RopeLayout::Half ? "half" : "interleaved";
}

constexpr SinusoidalLayout kSinusoidalLayouts[] = {SinusoidalLayout::Interleaved,
                                                   SinusoidalLayout::Split};
constexpr SinusoidalFrequencies kFrequencyKinds[] = {SinusoidalFrequencies::Vaswani,
                                                     SinusoidalFrequencies::Tensor2Tensor};
constexpr RopeLayout kRopeLayouts[] = {RopeLayout::Half, RopeLayout::Interleaved};

std::vector<double> encode(const SinusoidalPositions& positions, Index dim, Index position) {
  std::vector<float> out(static_cast<std::size_t>(dim));
  positions.encode(position, out);
  return ref::to_double(out);
}

// ---------------------------------------------------------------------------------------
// Sinusoidal: closed forms

// Oracle: the formulas written out inline, one (p, i) at a time. Tolerance 1e-7 absolute:
// values in [-1, 1] rounded once to float are within 2^-25 ~ 3e-8.
TEST(SinusoidalPositions, ClosedFormAtChosenPositions) {
  const Index d = 16, half = d / 2;
  for (SinusoidalLayout layout : kSinusoidalLayouts)
    for (SinusoidalFrequencies kind : kFrequencyKinds) {
      SCOPED_TRACE(std::string(name(layout)) + " " + name(kind));
      const SinusoidalPositions positions(d, layout, kind, /*offset=*/0);
      for (Index p : {0, 1, 7, 100, 4095}) {
        const std::vector<double> pe = encode(positions, d, p);
        for (Index i : {Index{0}, Index{1}, Index{3}, half - 1}) {
          const double w = kind == SinusoidalFrequencies::Vaswani
                               ? std::pow(10000.0, -2.0 * double(i) / double(d))
                               : std::exp(-double(i) * std::log(10000.0) / double(half - 1));
          const Index sin_at = layout == SinusoidalLayout::Interleaved ? 2 * i : i;
          const Index cos_at = layout == SinusoidalLayout::Interleaved ? 2 * i + 1 : half + i;
          EXPECT_NEAR(pe[std::size_t(sin_at)], std::sin(double(p) * w), 1e-7)
              << "sin, p=" << p << " i=" << i;
          EXPECT_NEAR(pe[std::size_t(cos_at)], std::cos(double(p) * w), 1e-7)
              << "cos, p=" << p << " i=" << i;
        }
      }
    }
}

// Hand-checked constants: at p = 1, i = 0 every variant has w = 1 (sin 1, cos 1); the
// last tensor2tensor frequency is exactly 1/10000; Vaswani's last is 10000^(-(d-2)/d).
TEST(SinusoidalPositions, KnownConstants) {
  const SinusoidalPositions t2t(8, SinusoidalLayout::Split, SinusoidalFrequencies::Tensor2Tensor,
                                0);
  std::vector<double> pe = encode(t2t, 8, 5000);
  EXPECT_NEAR(pe[0], std::sin(5000.0), 1e-7);
  EXPECT_NEAR(pe[3], std::sin(0.5), 1e-7);  // 5000 * 1e-4
  EXPECT_NEAR(pe[7], std::cos(0.5), 1e-7);
  const SinusoidalPositions vaswani(4, SinusoidalLayout::Interleaved,
                                    SinusoidalFrequencies::Vaswani, 0);
  pe = encode(vaswani, 4, 100);  // w_1 = 10000^(-1/2) = 0.01
  EXPECT_NEAR(pe[0], std::sin(100.0), 1e-7);
  EXPECT_NEAR(pe[2], std::sin(1.0), 1e-7);
  EXPECT_NEAR(pe[3], std::cos(1.0), 1e-7);
}

// Oracle: reference::sinusoidal_table. add() must add row offset + first_step + t to row
// t, on a strided view, leaving the neighbours alone. Tolerance 1e-6 + 1e-6*|want|: the
// pe value and the sum are each rounded to float once (|emb + pe| <= 2).
TEST(SinusoidalPositions, AddUsesOffsetAndFirstStep) {
  std::mt19937 rng(11);
  const Index d = 12, T = 9, offset = 2, first_step = 5;
  for (SinusoidalLayout layout : kSinusoidalLayouts)
    for (SinusoidalFrequencies kind : kFrequencyKinds) {
      SCOPED_TRACE(std::string(name(layout)) + " " + name(kind));
      Matrix wide = ref::random_matrix(T, d + 7, rng);
      const Matrix before = wide;
      const MatrixRef emb = wide.view().col_block(3, d);
      Matrix64 want = emb;
      const Matrix64 pe = ref::sinusoidal_table(offset + first_step, T, d, layout, kind);
      for (Index t = 0; t < T; ++t)
        for (Index j = 0; j < d; ++j) want(t, j) += pe(t, j);

      SinusoidalPositions(d, layout, kind, offset).add(emb, first_step);
      expect_close(emb, want, 1e-6, 1e-6);
      expect_outside_unchanged(wide, before, 3, d);
    }
}

TEST(SinusoidalPositions, RejectsBadDimensionsAndWidths) {
  expect_mentions(ref::error_message([] {
                    SinusoidalPositions(7, SinusoidalLayout::Split,
                                        SinusoidalFrequencies::Vaswani, 0);
                  }),
                  {"sinusoidal", "7", "even"});
  expect_mentions(ref::error_message([] {
                    SinusoidalPositions(2, SinusoidalLayout::Split,
                                        SinusoidalFrequencies::Tensor2Tensor, 0);
                  }),
                  {"sinusoidal", "d >= 4", "d=2"});
  // d = 2 with Vaswani frequencies is fine (w_0 = 1).
  EXPECT_NO_THROW(SinusoidalPositions(2, SinusoidalLayout::Split, SinusoidalFrequencies::Vaswani,
                                      0));
  const SinusoidalPositions positions(8, SinusoidalLayout::Interleaved,
                                      SinusoidalFrequencies::Vaswani, 0);
  Matrix emb(3, 10);
  expect_mentions(ref::error_message([&] { positions.add(emb, 0); }),
                  {"sinusoidal", "[3, 10]", "8"});
}

// ---------------------------------------------------------------------------------------
// Sinusoidal: the relative-position property

// For each i, the (sin, cos) pair of frequency w_i at pos + k is the pair at pos rotated
// by k*w_i:
//   sin((p+k)w) = sin(pw) cos(kw) + cos(pw) sin(kw)
//   cos((p+k)w) = cos(pw) cos(kw) - sin(pw) sin(kw)
// M_k is built once, as a dense [d, d] matrix from the frequencies alone, then applied to
// PE(pos) for every pos in 0..200. Tolerance 1e-6 absolute: each PE entry is rounded to
// float (<= 3e-8); M_k is a rotation, so the error of M_k PE(pos) stays below ~1e-7.
TEST(SinusoidalPositions, ShiftIsOneFixedLinearMap) {
  const Index d = 32, half = d / 2;
  for (SinusoidalLayout layout : kSinusoidalLayouts)
    for (SinusoidalFrequencies kind : kFrequencyKinds) {
      SCOPED_TRACE(std::string(name(layout)) + " " + name(kind));
      const SinusoidalPositions positions(d, layout, kind, 0);
      const std::vector<double> w = ref::sinusoidal_frequencies(d, kind);
      for (Index k : {1, 5, 17}) {
        SCOPED_TRACE("k=" + std::to_string(k));
        Matrix64 m(d, d);  // M_k
        for (Index i = 0; i < half; ++i) {
          const Index s = layout == SinusoidalLayout::Interleaved ? 2 * i : i;
          const Index c = layout == SinusoidalLayout::Interleaved ? 2 * i + 1 : half + i;
          const double angle = double(k) * w[std::size_t(i)];
          m(s, s) = std::cos(angle);
          m(s, c) = std::sin(angle);
          m(c, s) = -std::sin(angle);
          m(c, c) = std::cos(angle);
        }
        for (Index pos = 0; pos <= 200; ++pos) {
          const std::vector<double> here = encode(positions, d, pos);
          const std::vector<double> there = encode(positions, d, pos + k);
          const Matrix64 shifted = ref::matmul(m, Matrix64(d, 1, here));
          ASSERT_TRUE(ref::all_close(there, shifted.values(), {d}, 1e-6, 0.0))
              << "PE(" << pos + k << ") != M_" << k << " PE(" << pos << ")";
        }
      }
    }
}

// ---------------------------------------------------------------------------------------
// Learned

// Table row r holds 1000*r + j, so any wrong row shows. Tolerance 1e-3 absolute: far
// below the gap of 1000 between rows, above the one float rounding of the sum (at most
// 2.5e-4 for sums below 8192).
TEST(LearnedPositions, AddsRowOffsetPlusStep) {
  const Index offset = 2, max_positions = 8, d = 5;
  std::vector<float> table(std::size_t((max_positions + offset) * d));
  for (Index r = 0; r < max_positions + offset; ++r)
    for (Index j = 0; j < d; ++j) table[std::size_t(r * d + j)] = float(1000 * r + j);
  const LearnedPositions positions({table.data(), {max_positions + offset, d}}, offset);
  EXPECT_EQ(positions.max_steps(), max_positions);

  std::mt19937 rng(12);
  Matrix wide = ref::random_matrix(4, d + 3, rng);
  const Matrix before = wide;
  const MatrixRef emb = wide.view().col_block(1, d);
  Matrix64 want = emb;
  const Index first_step = 3;
  for (Index t = 0; t < 4; ++t)
    for (Index j = 0; j < d; ++j) want(t, j) += 1000.0 * double(offset + first_step + t) + j;

  positions.add(emb, first_step);
  expect_close(emb, want, 1e-3, 0.0);
  expect_outside_unchanged(wide, before, 1, d);
}

// The boundary is exact: with offset 2 and max_position_embeddings 8 (a 10-row table),
// steps 3..7 (5 tokens after 3 cached) fit, one more token throws, and so does a first
// step one past the end. A throw leaves the embeddings untouched.
TEST(LearnedPositions, ThrowsExactlyPastTheEnd) {
  const Index offset = 2, max_positions = 8, d = 4;
  const std::vector<float> table(std::size_t((max_positions + offset) * d), 1.0f);
  const LearnedPositions positions({table.data(), {max_positions + offset, d}}, offset);

  Matrix fits(5, d), too_long(6, d), full(8, d), over_full(9, d), one(1, d);
  EXPECT_NO_THROW(positions.add(fits, 3));
  EXPECT_NO_THROW(positions.add(full, 0));
  EXPECT_NO_THROW(positions.add(one, 7));

  too_long.fill(0.0f);
  const std::string message = ref::error_message([&] { positions.add(too_long, 3); });
  expect_mentions(message, {"learned positions", "9 tokens", "up to 8",
                            "max_position_embeddings=8", "shorten the input"});
  for (Index r = 0; r < too_long.rows(); ++r)
    for (float v : too_long.row(r)) ASSERT_EQ(v, 0.0f) << "a failed add() wrote";

  expect_mentions(ref::error_message([&] { positions.add(over_full, 0); }),
                  {"9 tokens", "max_position_embeddings=8"});
  expect_mentions(ref::error_message([&] { positions.add(one, 8); }),
                  {"9 tokens", "up to 8", "max_position_embeddings=8"});

  // The example of the brief: 40 tokens, 32 positions, no offset.
  const std::vector<float> table32(std::size_t(32 * d));
  const LearnedPositions short_model({table32.data(), {32, d}}, 0);
  Matrix forty(40, d);
  EXPECT_EQ(ref::error_message([&] { short_model.add(forty, 0); }),
            "learned positions: a sequence of 40 tokens needs positions up to 39, but this "
            "model has max_position_embeddings=32 (shorten the input or use a model with "
            "sinusoidal/rope positions)");
}

TEST(LearnedPositions, RejectsMismatchedWidthsAndTables) {
  const std::vector<float> table(10 * 4);
  const LearnedPositions positions({table.data(), {10, 4}}, 0);
  Matrix emb(2, 6);
  expect_mentions(ref::error_message([&] { positions.add(emb, 0); }),
                  {"learned positions", "[2, 6]", "[10, 4]"});
  expect_mentions(ref::error_message([&] { LearnedPositions({table.data(), {40}}, 0); }),
                  {"learned positions", "[40]"});
  expect_mentions(ref::error_message([&] { LearnedPositions({table.data(), {10, 4}}, 10); }),
                  {"offset 10", "[10, 4]"});
}

// ---------------------------------------------------------------------------------------
// RoPE

// Oracle: reference::rope, the cos/sin-vector form (x*cos + rotate_half(x)*sin), not the
// engine's pair loop. Three heads of a fused [T, 3*D] projection (a strided col_block),
// offset and first_step both nonzero, positions near 40 and near 4100. Tolerance
// 1e-6 + 1e-6*|want|: the engine rotates in double and rounds once; |values| <= sqrt(2).
// (An angle p*w_i formed in float would be off by up to p * 2^-24 ~ 2.4e-4 at p = 4100.)
TEST(RotaryEmbedding, MatchesReferenceBothLayouts) {
  std::mt19937 rng(13);
  const Index T = 6, head_dim = 16, heads = 3, D = heads * head_dim;
  const Index offset = 2;
  for (RopeLayout layout : kRopeLayouts) {
    for (Index first_step : {Index{37}, Index{4093}}) {
      SCOPED_TRACE(std::string(name(layout)) + " first_step=" + std::to_string(first_step));
      Matrix qkv = ref::random_matrix(T, 3 * D, rng);
      const Matrix before = qkv;
      const MatrixRef k = qkv.view().col_block(D, D);
      const Matrix64 want = ref::rope(k, head_dim, 10000.0, layout, offset + first_step);
      RotaryEmbedding(head_dim, 10000.0, layout, offset).rotate(k, first_step);
      expect_close(k, want, 1e-6, 1e-6);
      expect_outside_unchanged(qkv, before, D, D);
    }
  }
}

// Closed form for one pair: dh = 2 has the single frequency theta^0 = 1, so position p
// rotates (a, b) by p radians. Tolerance 1e-6 (float rounding of |values| <= 5).
TEST(RotaryEmbedding, SinglePairIsAPlaneRotation) {
  for (RopeLayout layout : kRopeLayouts) {
    Matrix x(1, 2);
    x(0, 0) = 3.0f;
    x(0, 1) = 4.0f;
    RotaryEmbedding(2, 500.0, layout, 0).rotate(x, 2);
    expect_close(x.row(0),
                 std::vector<double>{3 * std::cos(2.0) - 4 * std::sin(2.0),
                                     3 * std::sin(2.0) + 4 * std::cos(2.0)},
                 1e-6, 1e-6);
  }
}

TEST(RotaryEmbedding, RejectsBadArguments) {
  expect_mentions(ref::error_message([] { RotaryEmbedding(7, 10000.0, RopeLayout::Half, 0); }),
                  {"rotary", "head_dim 7", "even"});
  expect_mentions(ref::error_message([] { RotaryEmbedding(8, 0.0, RopeLayout::Half, 0); }),
                  {"rotary", "theta"});
  const RotaryEmbedding rope(8, 10000.0, RopeLayout::Half, 0);
  Matrix x(3, 20);
  expect_mentions(ref::error_message([&] { rope.rotate(x, 0); }),
                  {"rotary", "[3, 20]", "head_dim=8"});
}

// <R_m q, R_n k> for one head: rotates copies of q and k at steps m and n.
double rotated_dot(const RotaryEmbedding& rope, const std::vector<float>& q,
                   const std::vector<float>& k, Index m, Index n) {
  const Index dh = static_cast<Index>(q.size());
  Matrix rq(1, dh), rk(1, dh);
  std::copy(q.begin(), q.end(), rq.row(0).begin());
  std::copy(k.begin(), k.end(), rk.row(0).begin());
  rope.rotate(rq, m);
  rope.rotate(rk, n);
  double dot = 0.0;
  for (Index j = 0; j < dh; ++j) dot += double(rq(0, j)) * double(rk(0, j));
  return dot;
}

// Relative positions: pairs (m, n) with the same m - n give the same score, up to the
// float rounding of the rotated vectors: tolerance 1e-4 * |q| |k| (relative to the
// largest possible score, since a score itself may be near 0). Different m - n give
// scores that differ by more than that tolerance (checked on these seeds).
TEST(RotaryEmbedding, ScoreDependsOnlyOnRelativePosition) {
  std::mt19937 rng(14);
  const Index dh = 64;
  for (RopeLayout layout : kRopeLayouts) {
    SCOPED_TRACE(name(layout));
    const RotaryEmbedding rope(dh, 10000.0, layout, /*offset=*/3);
    const std::vector<float> q = ref::random_vector(dh, rng);
    const std::vector<float> k = ref::random_vector(dh, rng);
    double qq = 0.0, kk = 0.0;
    for (Index j = 0; j < dh; ++j) {
      qq += double(q[std::size_t(j)]) * q[std::size_t(j)];
      kk += double(k[std::size_t(j)]) * k[std::size_t(j)];
    }
    const double tolerance = 1e-4 * std::sqrt(qq * kk);

    std::vector<double> by_difference;
    for (Index difference : {0, 1, 3, 10, -7}) {
      SCOPED_TRACE("m - n = " + std::to_string(difference));
      const double first = rotated_dot(rope, q, k, 20 + difference, 20);
      for (Index n : {0, 7, 100, 1000, 4000}) {
        if (n + difference < 0) continue;
        EXPECT_NEAR(rotated_dot(rope, q, k, n + difference, n), first, tolerance)
            << "m=" << n + difference << " n=" << n;
      }
      for (double other : by_difference)
        EXPECT_GT(std::abs(first - other), 10 * tolerance) << "scores for different m - n "
                                                              "coincide";
      by_difference.push_back(first);
    }
  }
}

// Rotation preserves each head's norm. Tolerance 1e-5 relative: float rounding of 64
// entries, each within 2^-24 relative.
TEST(RotaryEmbedding, PreservesEachHeadNorm) {
  std::mt19937 rng(15);
  const Index T = 5, dh = 32, heads = 4;
  for (RopeLayout layout : kRopeLayouts) {
    SCOPED_TRACE(name(layout));
    Matrix x = ref::random_matrix(T, heads * dh, rng, -3.0f, 3.0f);
    const Matrix before = x;
    RotaryEmbedding(dh, 10000.0, layout, 0).rotate(x, 123);
    for (Index t = 0; t < T; ++t)
      for (Index h = 0; h < heads; ++h) {
        double norm_before = 0.0, norm_after = 0.0;
        for (Index j = h * dh; j < (h + 1) * dh; ++j) {
          norm_before += double(before(t, j)) * before(t, j);
          norm_after += double(x(t, j)) * x(t, j);
        }
        EXPECT_NEAR(std::sqrt(norm_after), std::sqrt(norm_before),
                    1e-5 * std::sqrt(norm_before))
            << "row " << t << " head " << h;
      }
  }
}

}  // namespace
}  // namespace ordo
