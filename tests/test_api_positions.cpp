// The public position tables (ordo/positions.hpp), as `ordo viz pe` and any program get
// them. Oracles: the papers' formulas in double precision, written here; for trained
// tables, the tensor in the model's own safetensors file. Tolerance 1e-6: the library
// computes angles in double and rounds each value once to float32 (|v| <= 1, so one
// rounding is below 6e-8; 1e-6 leaves room for libm's last-bit differences).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

#include "models/safetensors.h"

namespace {

namespace fs = std::filesystem;

const fs::path kWeights = fs::path(ORDO_SOURCE_DIR) / "weights";
constexpr double kTolerance = 1e-6;

double angle(int position, int pair, int width, double theta = 10000.0) {
  return position * std::pow(theta, -2.0 * pair / width);
}

bool says(const std::function<void()>& call, const std::string& part) {
  try {
    call();
  } catch (const ordo::Error& e) {
    return std::string(e.what()).find(part) != std::string::npos;
  }
  return false;
}

TEST(ApiPositions, SinusoidalTableIsVaswanisInterleaved) {
  const ordo::PositionTable t = ordo::sinusoidal_table(50, 16);
  EXPECT_EQ(t.kind, ordo::PositionTable::Kind::Added);
  EXPECT_EQ(t.scheme, "sinusoidal");
  EXPECT_EQ(t.layout, "interleaved");
  ASSERT_EQ(t.rows, 50);
  ASSERT_EQ(t.cols, 16);
  for (int s = 0; s < 50; ++s)
    for (int i = 0; i < 8; ++i) {
      ASSERT_NEAR(t.at(s, 2 * i), std::sin(angle(s, i, 16)), kTolerance) << "step " << s << " pair " << i;
      ASSERT_NEAR(t.at(s, 2 * i + 1), std::cos(angle(s, i, 16)), kTolerance) << "step " << s << " pair " << i;
    }
}

TEST(ApiPositions, RotaryTableRotatesPairsHalfApart) {
  const ordo::PositionTable t = ordo::rotary_table(40, 8, 500.0);
  EXPECT_EQ(t.kind, ordo::PositionTable::Kind::Rotation);
  EXPECT_EQ(t.layout, "half");
  EXPECT_EQ(t.rope_theta, 500.0);
  ASSERT_EQ(t.rows, 40);
  ASSERT_EQ(t.cols, 8);
  for (int s = 0; s < 40; ++s)
    for (int i = 0; i < 4; ++i) {
      ASSERT_NEAR(t.at(s, i), std::cos(angle(s, i, 8, 500.0)), kTolerance) << "step " << s << " pair " << i;
      ASSERT_NEAR(t.at(s, i + 4), std::sin(angle(s, i, 8, 500.0)), kTolerance) << "step " << s << " pair " << i;
    }
}

// ALiBi's slopes for 8 heads are 2^-1 .. 2^-8 (the paper's geometric sequence); the
// encoder's bias is -m |key - query|, the decoder's -m (query - key) over earlier keys.
TEST(ApiPositions, AlibiTableIsMinusSlopeTimesDistance) {
  const int steps = 6;
  const ordo::PositionTable both = ordo::alibi_table(steps, 8, ordo::Stack::Encoder);
  const ordo::PositionTable causal = ordo::alibi_table(steps, 8, ordo::Stack::Decoder);
  EXPECT_EQ(both.kind, ordo::PositionTable::Kind::ScoreBias);
  ASSERT_EQ(both.rows, 8);
  ASSERT_EQ(both.cols, 2 * steps - 1);
  ASSERT_EQ(causal.cols, steps);
  EXPECT_EQ(both.first_relative_position, -(steps - 1));
  EXPECT_EQ(causal.first_relative_position, -(steps - 1));
  for (int h = 0; h < 8; ++h) {
    const double slope = std::pow(2.0, -(h + 1));
    for (int c = 0; c < both.cols; ++c)
      ASSERT_NEAR(both.at(h, c), -slope * std::abs(c - (steps - 1)), kTolerance) << "head " << h << " column " << c;
    for (int c = 0; c < causal.cols; ++c)
      ASSERT_NEAR(causal.at(h, c), -slope * ((steps - 1) - c), kTolerance) << "head " << h << " column " << c;
  }
}

// A learned model's table is its tensor, row for row (position_offset 0 here).
TEST(ApiPositions, LearnedTableIsTheModelsTensor) {
  const ordo::Model model = ordo::Model::load(kWeights / "learned");
  const ordo::PositionTable t = model.position_table(ordo::Stack::Decoder);
  const auto file = ordo::SafetensorsFile::open(kWeights / "learned" / "model.safetensors");
  const ordo::TensorInfo* info = file.find("model.decoder.embed_positions.weight");
  ASSERT_NE(info, nullptr);
  std::vector<float> storage;
  const ordo::TensorView tensor = file.as_float32(*info, storage);
  ASSERT_EQ(t.rows, tensor.dim(0)) << "steps 0 asks for every row";
  ASSERT_EQ(t.cols, tensor.dim(1));
  for (int s = 0; s < t.rows; ++s)
    for (int d = 0; d < t.cols; ++d) ASSERT_EQ(t.at(s, d), tensor.data()[s * t.cols + d]) << "row " << s << " dim " << d;
  EXPECT_EQ(model.position_table(ordo::Stack::Encoder, 3).rows, 3);
  EXPECT_TRUE(says([&] { model.position_table(ordo::Stack::Encoder, static_cast<int>(tensor.dim(0)) + 1); },
                   "max_position_embeddings"));
}

// The model's settings reach the table: the split layout, RoPE's head width and theta.
TEST(ApiPositions, ModelTablesUseTheModelsSettings) {
  const ordo::PositionTable split = ordo::Model::load(kWeights / "sinusoidal-split").position_table(ordo::Stack::Encoder, 20);
  EXPECT_EQ(split.layout, "split");
  ASSERT_EQ(split.cols, 128);
  for (int s = 0; s < 20; ++s)
    for (int i = 0; i < 64; ++i) {
      ASSERT_NEAR(split.at(s, i), std::sin(angle(s, i, 128)), kTolerance) << "step " << s << " pair " << i;
      ASSERT_NEAR(split.at(s, 64 + i), std::cos(angle(s, i, 128)), kTolerance) << "step " << s << " pair " << i;
    }
  const ordo::PositionTable rope = ordo::Model::load(kWeights / "rope").position_table(ordo::Stack::Decoder, 10);
  EXPECT_EQ(rope.kind, ordo::PositionTable::Kind::Rotation);
  EXPECT_EQ(rope.cols, 128 / 4) << "one head's width";
  EXPECT_EQ(rope.rope_theta, 10000.0);
  const ordo::PositionTable t5 = ordo::Model::load(kWeights / "t5_relative").position_table(ordo::Stack::Encoder, 9);
  EXPECT_EQ(t5.kind, ordo::PositionTable::Kind::ScoreBias);
  EXPECT_EQ(t5.rows, 4);
  EXPECT_EQ(t5.cols, 17);
}

TEST(ApiPositions, WhatHasNoTableIsAnErrorSayingWhy) {
  EXPECT_TRUE(says([] { ordo::Model::load(kWeights / "none").position_table(ordo::Stack::Encoder, 4); },
                   "uses no positions"));
  EXPECT_TRUE(says([] { ordo::Model::load(kWeights / "german-llama").position_table(ordo::Stack::Encoder, 4); },
                   "decoder-only"));
  EXPECT_TRUE(says([] { ordo::Model::load(kWeights / "sinusoidal").position_table(ordo::Stack::Encoder); },
                   "needs a number of steps"));
  EXPECT_TRUE(says([] { ordo::sinusoidal_table(ordo::kMaxSequenceLength + 1, 8); }, "steps"));
  EXPECT_TRUE(says([] { ordo::sinusoidal_table(4, 7); }, "even"));
  EXPECT_TRUE(says([] { ordo::alibi_table(4, 2, ordo::Stack::Encoder).at(2, 0); }, "outside"));
}

}  // namespace
