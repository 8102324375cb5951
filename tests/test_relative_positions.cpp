// ALiBi and T5 relative buckets against the papers' numbers, written out by hand; the
// whole models are checked against the PyTorch oracle in test_parity.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/error.h"
#include "engine/relative_positions.h"

namespace ordo {
namespace {

// Press et al., section 3: "For a model with 8 heads, our slopes are the geometric
// sequence 1/2^1, 1/2^2, ..., 1/2^8"; 16 heads interpolate, 1/2^0.5, 1/2^1, ..., 1/2^8;
// other counts take the 8 slopes of 8 heads, then every other slope of 16.
TEST(Alibi, SlopesAreThePapers) {
  std::vector<double> eight, sixteen;
  for (int h = 1; h <= 8; ++h) eight.push_back(std::pow(2.0, -h));
  for (int h = 1; h <= 16; ++h) sixteen.push_back(std::pow(2.0, -0.5 * h));
  std::vector<double> twelve = eight;
  for (double e : {0.5, 1.5, 2.5, 3.5}) twelve.push_back(std::pow(2.0, -e));

  const auto expect_slopes = [](Index heads, const std::vector<double>& expected) {
    const std::vector<double> slopes = alibi_slopes(heads);
    ASSERT_EQ(slopes.size(), expected.size()) << heads << " heads";
    for (std::size_t i = 0; i < slopes.size(); ++i) EXPECT_DOUBLE_EQ(slopes[i], expected[i]) << heads << " heads, " << i;
  };
  expect_slopes(8, eight);
  expect_slopes(12, twelve);
  expect_slopes(16, sixteen);
  expect_slopes(1, {std::pow(2.0, -8)});
  expect_slopes(4, {std::pow(2.0, -2), std::pow(2.0, -4), std::pow(2.0, -6), std::pow(2.0, -8)});
  EXPECT_THROW(alibi_slopes(0), Error);
}

// One head of 4 heads (slope 1/4 for head 0): bidirectional -m|i - j|; causal -m(i - j),
// with the query at its real step (a decoder's cached step 5 against keys 0..6).
TEST(Alibi, BiasesByDistance) {
  Matrix scores(2, 7);
  scores.view().fill(1.0f);
  AlibiBias(4, Direction::Bidirectional).add(scores.view(), 0, 0);
  for (Index i = 0; i < 2; ++i)
    for (Index j = 0; j < 7; ++j) EXPECT_FLOAT_EQ(scores(i, j), 1.0f - 0.25f * static_cast<float>(std::abs(i - j)));

  Matrix causal(1, 7);
  causal.view().fill(0.0f);
  AlibiBias(4, Direction::Causal).add(causal.view(), 1, 5);  // head 1: slope 1/16
  for (Index j = 0; j <= 5; ++j) EXPECT_FLOAT_EQ(causal(0, j), -0.0625f * static_cast<float>(5 - j));
}

// A table by hand for T5's defaults (32 buckets, max_distance 128), from the bucket
// formula: within one side of B buckets, distances n < B/2 have their own bucket;
// beyond, bucket B/2 + floor(log(n / (B/2)) / log(128 / (B/2)) * B/2), at most B - 1.
//   bidirectional (B = 16 per side; keys after the query add 16):
//     n 0..7 -> n, 8..11 -> 8, 12..15 -> 9, 16..22 -> 10, 23..31 -> 11, 32..45 -> 12,
//     46..63 -> 13, 64..90 -> 14, 91.. -> 15
//   causal (B = 32, n = query - key; keys after the query -> 0):
//     n 0..15 -> n, 16..18 -> 16, 19..20 -> 17, 21..23 -> 18, 24..26 -> 19, 27..30 -> 20,
//     31..34 -> 21, 35..39 -> 22, 40..45 -> 23, 46..51 -> 24, 52..58 -> 25, 59..66 -> 26,
//     67..76 -> 27, 77..86 -> 28, 87..98 -> 29, 99..112 -> 30, 113.. -> 31
struct Range {
  Index first, last, bucket;  // bucket -1: the distance itself
};

Index by_hand(const std::vector<Range>& ranges, Index n) {
  for (const Range& r : ranges)
    if (n >= r.first && n <= r.last) return r.bucket < 0 ? n : r.bucket;
  return -1;
}

TEST(T5Relative, BucketsMatchAHandTableFromMinus200To200) {
  constexpr Index kFar = std::numeric_limits<Index>::max();
  const std::vector<Range> bidirectional = {{0, 7, -1},    {8, 11, 8},   {12, 15, 9},  {16, 22, 10}, {23, 31, 11},
                                            {32, 45, 12},  {46, 63, 13}, {64, 90, 14}, {91, kFar, 15}};
  const std::vector<Range> causal = {{0, 15, -1},   {16, 18, 16},  {19, 20, 17},  {21, 23, 18},  {24, 26, 19},
                                     {27, 30, 20},  {31, 34, 21},  {35, 39, 22},  {40, 45, 23},  {46, 51, 24},
                                     {52, 58, 25},  {59, 66, 26},  {67, 76, 27},  {77, 86, 28},  {87, 98, 29},
                                     {99, 112, 30}, {113, kFar, 31}};
  for (Index relative = -200; relative <= 200; ++relative) {  // key - query
    const Index expected_bidirectional = by_hand(bidirectional, std::abs(relative)) + (relative > 0 ? 16 : 0);
    EXPECT_EQ(t5_relative_bucket(relative, Direction::Bidirectional, 32, 128), expected_bidirectional) << relative;
    const Index expected_causal = by_hand(causal, std::max<Index>(-relative, 0));
    EXPECT_EQ(t5_relative_bucket(relative, Direction::Causal, 32, 128), expected_causal) << relative;
  }
}

// The bias is the table's entry for each (query, key) bucket: with table[b][h] = 10 b + h
// the scores read back as buckets.
TEST(T5Relative, AddsTheTableEntryOfEachBucket) {
  constexpr Index kBuckets = 8, kHeads = 2, kMaxDistance = 6;
  std::vector<float> table;
  for (Index b = 0; b < kBuckets; ++b)
    for (Index h = 0; h < kHeads; ++h) table.push_back(static_cast<float>(10 * b + h));
  const TensorView view(table.data(), {kBuckets, kHeads});
  for (const Direction direction : {Direction::Bidirectional, Direction::Causal}) {
    const T5RelativeBias bias(view, direction, kMaxDistance);
    Matrix scores(3, 20);
    scores.view().fill(0.0f);
    bias.add(scores.view(), 1, 9);  // queries at steps 9..11, keys 0..19: distances past 6
    for (Index i = 0; i < 3; ++i)
      for (Index j = 0; j < 20; ++j)
        EXPECT_FLOAT_EQ(scores(i, j),
                        static_cast<float>(10 * t5_relative_bucket(j - (9 + i), direction, kBuckets, kMaxDistance) + 1))
            << i << ", " << j;
  }
}

TEST(T5Relative, RejectsUnusableTables) {
  std::vector<float> table(8 * 2, 0.0f);
  EXPECT_THROW(T5RelativeBias(TensorView(table.data(), {16}), Direction::Causal, 6), Error);
  EXPECT_THROW(T5RelativeBias(TensorView(table.data(), {8, 2}), Direction::Causal, 4), Error);  // 4 <= 8/2
  EXPECT_THROW(T5RelativeBias(TensorView(table.data(), {2, 8}), Direction::Causal, 6), Error);  // 2 buckets
}

}  // namespace
}  // namespace ordo
