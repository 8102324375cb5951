// RoPE scaling (engine/rope_scaling.h, models/rope_scaling_config.h): config.json's
// rope_scaling in both families, every bad value named by its key, and the rotation each
// type gives against closed forms. Whole models against the PyTorch oracle, at positions
// below and well past the trained length and through KV-cached decoding, are in
// test_generation_parity.cpp (the oracle's rope-scaling models).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/positions.h"
#include "models/config.h"
#include "tests/model_factory.h"
#include "tests/reference.h"

namespace ordo {
namespace {

namespace ref = reference;
using json = nlohmann::json;
using ::testing::HasSubstr;
using testing_support::tiny_config;

json llama() {
  return {{"model_type", "llama"},   {"vocab_size", 30},          {"hidden_size", 16},
          {"intermediate_size", 24}, {"num_hidden_layers", 1},    {"num_attention_heads", 2},
          {"bos_token_id", 2},       {"eos_token_id", 1},         {"max_position_embeddings", 64}};
}
json rope_model() {
  json c = tiny_config();
  c["position_encoding"] = "rope";
  return c;
}

json with_scaling(json config, const json& scaling) {
  config["rope_scaling"] = scaling;
  return config;
}

std::string error_of(const json& config) {
  try {
    ModelConfig::from_json(config, "dir/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

const json kLlama3 = {{"rope_type", "llama3"},
                      {"factor", 8.0},
                      {"low_freq_factor", 1.0},
                      {"high_freq_factor", 4.0},
                      {"original_max_position_embeddings", 16}};

TEST(RopeScalingConfig, EachTypeIsReadInBothFamilies) {
  for (const json& base : {llama(), rope_model()}) {
    SCOPED_TRACE(base.dump());
    EXPECT_FALSE(ModelConfig::from_json(base, "c").rope_scaling.enabled());
    EXPECT_FALSE(ModelConfig::from_json(with_scaling(base, nullptr), "c").rope_scaling.enabled());
    EXPECT_FALSE(ModelConfig::from_json(with_scaling(base, {{"rope_type", "default"}}), "c").rope_scaling.enabled());

    const RopeScaling linear =
        ModelConfig::from_json(with_scaling(base, {{"type", "linear"}, {"factor", 2}}), "c").rope_scaling;
    EXPECT_EQ(linear.type, RopeScalingType::Linear);
    EXPECT_EQ(linear.factor, 2.0);
    EXPECT_EQ(ModelConfig::from_json(with_scaling(base, {{"rope_type", "dynamic"}, {"factor", 3.0}}), "c")
                  .rope_scaling.type,
              RopeScalingType::Dynamic);
    const RopeScaling yarn = ModelConfig::from_json(
        with_scaling(base, {{"rope_type", "yarn"}, {"type", "yarn"}, {"factor", 4.0}, {"beta_fast", 16},
                            {"attention_factor", nullptr}}),
        "c").rope_scaling;
    EXPECT_EQ(yarn.type, RopeScalingType::Yarn);
    EXPECT_EQ(yarn.beta_fast, 16.0);
    EXPECT_EQ(yarn.beta_slow, 1.0);  // transformers' default
    EXPECT_FALSE(yarn.attention_factor.has_value());
    const RopeScaling llama3 = ModelConfig::from_json(with_scaling(base, kLlama3), "c").rope_scaling;
    EXPECT_EQ(llama3.type, RopeScalingType::Llama3);
    EXPECT_EQ(llama3.original_max_position_embeddings, 16);
    EXPECT_EQ(llama3.high_freq_factor, 4.0);
  }
}

TEST(RopeScalingConfig, RoundTripsThroughToJson) {
  for (const json& base : {llama(), rope_model()})
    for (const json& scaling :
         {json(nullptr), json{{"rope_type", "linear"}, {"factor", 2.0}},
          json{{"rope_type", "dynamic"}, {"factor", 2.0}, {"original_max_position_embeddings", 16}},
          json{{"rope_type", "yarn"}, {"factor", 4.0}, {"attention_factor", 1.5}, {"truncate", false}},
          kLlama3}) {
      SCOPED_TRACE(scaling.dump());
      const ModelConfig first = ModelConfig::from_json(with_scaling(base, scaling), "c");
      const json written = first.to_json();
      const ModelConfig again = ModelConfig::from_json(written, "c");
      EXPECT_EQ(again.to_json(), written);
      EXPECT_EQ(written.at("rope_scaling").is_null(), scaling.is_null());
    }
}

// Every bad value is one line naming rope_scaling's key (each of these was refused as a
// whole, "RoPE scaling is not supported", before rope_scaling was read).
TEST(RopeScalingConfig, BadValuesNameTheirKey) {
  const auto expect = [](const json& config, const std::string& key, const std::string& what) {
    const std::string message = error_of(config);
    EXPECT_THAT(message, HasSubstr("dir/config.json: key '" + key + "'")) << message;
    EXPECT_THAT(message, HasSubstr(what)) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos);
  };
  for (const json& base : {llama(), rope_model()}) {
    SCOPED_TRACE(base.dump());
    expect(with_scaling(base, {{"rope_type", "linear"}, {"factor", 0}}), "rope_scaling.factor",
           "must be a finite number > 0, got 0");
    expect(with_scaling(base, {{"rope_type", "dynamic"}, {"factor", -2.0}}), "rope_scaling.factor", "got -2");
    expect(with_scaling(base, {{"rope_type", "linear"}}), "rope_scaling.factor", "is missing");
    expect(with_scaling(base, {{"rope_type", "linear"}, {"factor", "2"}}), "rope_scaling.factor", "expected a number");
    expect(with_scaling(base, {{"factor", 2.0}}), "rope_scaling.rope_type", "is missing");
    expect(with_scaling(base, {{"rope_type", "longrope"}, {"factor", 2.0}}), "rope_scaling.rope_type",
           "longrope is not supported");
    expect(with_scaling(base, {{"type", "ntk"}, {"factor", 2.0}}), "rope_scaling.type", "unknown type \"ntk\"");
    expect(with_scaling(base, {{"rope_type", "yarn"}, {"type", "linear"}, {"factor", 2.0}}), "rope_scaling.type",
           "but rope_type is \"yarn\"");
    expect(with_scaling(base, {{"rope_type", "yarn"}, {"factor", 2.0}, {"mscale", 0.7}}), "rope_scaling.mscale",
           "is not a key of yarn scaling");
    expect(with_scaling(base, "linear"), "rope_scaling", "expected an object or null");
    json llama3 = kLlama3;
    llama3["original_max_position_embeddings"] = 0;
    expect(with_scaling(base, llama3), "rope_scaling.original_max_position_embeddings", "must be > 0, got 0");
    llama3["original_max_position_embeddings"] = 100;
    expect(with_scaling(base, llama3), "rope_scaling.original_max_position_embeddings",
           "above max_position_embeddings=");
    expect(with_scaling(base, {{"rope_type", "yarn"}, {"factor", 2.0}, {"original_max_position_embeddings", 1000}}),
           "rope_scaling.original_max_position_embeddings", "above max_position_embeddings=");
    expect(with_scaling(base, {{"rope_type", "dynamic"}, {"factor", 2.0}, {"original_max_position_embeddings", -1}}),
           "rope_scaling.original_max_position_embeddings", "must be > 0");
    llama3 = kLlama3;
    llama3.erase("original_max_position_embeddings");
    expect(with_scaling(base, llama3), "rope_scaling.original_max_position_embeddings", "is missing");
    llama3 = kLlama3;
    llama3["low_freq_factor"] = 4.0;
    expect(with_scaling(base, llama3), "rope_scaling.low_freq_factor",
           "must be below high_freq_factor, got low_freq_factor=4 and high_freq_factor=4");
    expect(with_scaling(base, {{"rope_type", "yarn"}, {"factor", 2.0}, {"beta_fast", 0.5}}), "rope_scaling.beta_fast",
           "must be at least beta_slow");
    expect(with_scaling(base, {{"rope_type", "yarn"}, {"factor", 2.0}, {"attention_factor", -1}}),
           "rope_scaling.attention_factor", "must be a finite number > 0");
  }
  // A model without RoPE has nothing to scale.
  for (const char* positions : {"sinusoidal", "learned", "alibi", "t5_relative", "none"}) {
    json c = tiny_config();
    c["position_encoding"] = positions;
    expect(with_scaling(c, {{"rope_type", "linear"}, {"factor", 2.0}}), "rope_scaling",
           "but this model has " + std::string(positions) + " positions, not rope");
  }
  // Dynamic scaling's exponent d / (d - 2) needs heads wider than 2.
  json narrow = llama();
  narrow["head_dim"] = 2;
  expect(with_scaling(narrow, {{"rope_type", "dynamic"}, {"factor", 2.0}}), "rope_scaling.rope_type",
         "needs a head dimension above 2");
}

// ---------------------------------------------------------------------------------------
// The rotation, against closed forms. Tolerance 1e-6 + 1e-6*|want| as RotaryEmbedding's
// own tests: the engine rotates in double and rounds once; |values| <= sqrt(2) * factor.

RopeScaling scaling_of(RopeScalingType type, double factor) {
  RopeScaling s;
  s.type = type;
  s.factor = factor;
  return s;
}

// Position interpolation is its definition: position p with factor f is plain RoPE at p / f.
TEST(RopeScalingRotation, LinearIsPlainRopeAtPositionOverFactor) {
  std::mt19937 rng(5);
  for (RopeLayout layout : {RopeLayout::Half, RopeLayout::Interleaved}) {
    Matrix x = ref::random_matrix(1, 32, rng);
    const ref::Matrix64 want = ref::rope(x, 16, 10000.0, layout, 25);
    RotaryEmbedding(16, 10000.0, layout, 0, scaling_of(RopeScalingType::Linear, 4.0), 64).rotate(x, 100);
    ref::expect_close(x, want, 1e-6, 1e-6);
  }
}

// Dynamic NTK: plain RoPE while the sequence fits max_position_embeddings; past it, plain
// RoPE with base theta * (factor L / max - (factor - 1))^(d / (d - 2)), L the sequence's
// last position + 1. Each sequence of a batch by its own length.
TEST(RopeScalingRotation, DynamicGrowsTheBasePastMaxPositionEmbeddingsPerSequence) {
  std::mt19937 rng(6);
  const RotaryEmbedding rope(8, 100.0, RopeLayout::Half, 0, scaling_of(RopeScalingType::Dynamic, 2.0), 16);
  // Two sequences of 4 rows: the first ends at position 10 + 3 (within 16), the second
  // at 30 + 1 (2 real rows, L = 32: base 100 * 3^(8/6)).
  Matrix x = ref::random_matrix(8, 16, rng);
  const Matrix before = x;
  const Index first_steps[] = {10, 30};
  const Index lengths[] = {4, 2};
  rope.rotate(x, BatchRows{4, first_steps, lengths});
  const ref::Matrix64 short_want = ref::rope(before.view().row_block(0, 4), 8, 100.0, RopeLayout::Half, 10);
  const ref::Matrix64 long_want =
      ref::rope(before.view().row_block(4, 2), 8, 100.0 * std::pow(3.0, 8.0 / 6.0), RopeLayout::Half, 30);
  ref::expect_close(x.view().row_block(0, 4), short_want, 1e-6, 1e-6);
  ref::expect_close(x.view().row_block(4, 2), long_want, 1e-6, 1e-6);
  EXPECT_EQ(rope.frequencies(16).inverse, rope.frequencies(1).inverse);
  EXPECT_NEAR(rope.frequencies(32).inverse[1], std::pow(100.0 * std::pow(3.0, 8.0 / 6.0), -0.25), 1e-15);
}

// YaRN with head_dim 16, theta 100, original 16: the ramp runs from dimension 0 (plain) to
// 2 (interpolated), so w_1 is the mean of both; q and k are scaled by 0.1 ln 4 + 1.
TEST(RopeScalingRotation, YarnRampsAndScales) {
  RopeScaling s = scaling_of(RopeScalingType::Yarn, 4.0);
  s.original_max_position_embeddings = 16;
  const RopeFrequencies f = RotaryEmbedding(16, 100.0, RopeLayout::Half, 0, s, 64).frequencies(64);
  EXPECT_NEAR(f.inverse[0], 1.0, 1e-15);
  EXPECT_NEAR(f.inverse[1], std::pow(100.0, -1.0 / 8) * (0.5 + 0.5 / 4), 1e-15);
  for (std::size_t i = 2; i < 8; ++i) EXPECT_NEAR(f.inverse[i], std::pow(100.0, -double(i) / 8) / 4, 1e-15) << i;
  EXPECT_NEAR(f.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-15);

  std::mt19937 rng(7);
  Matrix x = ref::random_matrix(3, 16, rng);
  const Matrix before = x;
  RotaryEmbedding(16, 100.0, RopeLayout::Interleaved, 0, s, 64).rotate(x, 40);
  for (Index r = 0; r < 3; ++r) {
    double got = 0.0, want = 0.0;
    for (Index c = 0; c < 16; ++c) {
      got += double(x(r, c)) * x(r, c);
      want += double(before(r, c)) * before(r, c);
    }
    EXPECT_NEAR(std::sqrt(got), f.attention_factor * std::sqrt(want), 1e-5) << r;
  }
}

// Llama 3 with head_dim 16, theta 100, original 16, low 1, high 2: wavelength 2 pi (< 8)
// kept, 2 pi 100^(1/8) = 11.2 mixed, the rest (> 16) divided by the factor.
TEST(RopeScalingRotation, Llama3KeepsMixesAndDividesByWavelength) {
  RopeScaling s = scaling_of(RopeScalingType::Llama3, 4.0);
  s.original_max_position_embeddings = 16;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 2.0;
  const RopeFrequencies f = RotaryEmbedding(16, 100.0, RopeLayout::Half, 0, s, 64).frequencies(64);
  EXPECT_NEAR(f.inverse[0], 1.0, 1e-15);
  const double w1 = std::pow(100.0, -1.0 / 8);
  const double smooth = 16.0 * w1 / (2 * std::numbers::pi) - 1.0;
  EXPECT_NEAR(f.inverse[1], (1 - smooth) * w1 / 4 + smooth * w1, 1e-15);
  for (std::size_t i = 2; i < 8; ++i) EXPECT_NEAR(f.inverse[i], std::pow(100.0, -double(i) / 8) / 4, 1e-15) << i;
  EXPECT_EQ(f.attention_factor, 1.0);
}

TEST(RopeScalingRotation, BadArgumentsAreRefused) {
  EXPECT_THAT(ref::error_message([] {
                RotaryEmbedding(8, 100.0, RopeLayout::Half, 0, scaling_of(RopeScalingType::Linear, 0.0), 16);
              }),
              HasSubstr("rope scaling factor"));
  EXPECT_THAT(ref::error_message([] {
                RotaryEmbedding(8, 100.0, RopeLayout::Half, 0, scaling_of(RopeScalingType::Dynamic, 2.0), 0);
              }),
              HasSubstr("needs max_position_embeddings > 0"));
  EXPECT_THAT(ref::error_message([] {
                RotaryEmbedding(2, 100.0, RopeLayout::Half, 0, scaling_of(RopeScalingType::Dynamic, 2.0), 8);
              }),
              HasSubstr("head dimension above 2"));
}

}  // namespace
}  // namespace ordo
