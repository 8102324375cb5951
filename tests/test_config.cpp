// config.json -> ModelConfig: defaults, the to_json round trip, and one error per rule,
// each naming the file and the key at fault.
// Oracle: the defaults and rules written in models/config.h and the brief; exact
// equality (no arithmetic involved).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "models/config.h"
#include "tests/model_factory.h"
#include "tests/reference.h"

namespace ordo {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using reference::error_message;
using testing_support::temp_dir;

// Only the required keys.
json minimal() {
  return {{"vocab_size", 100},           {"d_model", 64},
          {"encoder_layers", 2},         {"decoder_layers", 3},
          {"encoder_attention_heads", 4}, {"decoder_attention_heads", 8},
          {"encoder_ffn_dim", 128},      {"decoder_ffn_dim", 256},
          {"max_position_embeddings", 50}, {"pad_token_id", 1},
          {"eos_token_id", 2},           {"decoder_start_token_id", 3}};
}

// `config` with `key` set to `value`, parsed; returns the error message.
std::string error_with(const std::string& key, const json& value, json config = minimal()) {
  config[key] = value;
  return error_message([&] { ModelConfig::from_json(config, "dir/config.json"); });
}

TEST(Config, MinimalConfigGetsEveryDefault) {
  const ModelConfig c = ModelConfig::from_json(minimal(), "config.json");
  EXPECT_EQ(c.model_type, "ordo");
  EXPECT_EQ(c.vocab_size, 100);
  EXPECT_EQ(c.decoder_vocab_size, 100);  // defaults to vocab_size
  EXPECT_EQ(c.d_model, 64);
  EXPECT_EQ(c.encoder_layers, 2);
  EXPECT_EQ(c.decoder_layers, 3);
  EXPECT_EQ(c.encoder_attention_heads, 4);
  EXPECT_EQ(c.decoder_attention_heads, 8);
  EXPECT_EQ(c.encoder_ffn_dim, 128);
  EXPECT_EQ(c.decoder_ffn_dim, 256);
  EXPECT_EQ(c.activation_function, Activation::Relu);
  EXPECT_FALSE(c.normalize_before);
  EXPECT_FALSE(c.scale_embedding);
  EXPECT_FALSE(c.layernorm_embedding);
  EXPECT_EQ(c.max_position_embeddings, 50);
  EXPECT_EQ(c.position_encoding, PositionEncoding::Sinusoidal);
  EXPECT_EQ(c.sinusoidal_layout, SinusoidalLayout::Interleaved);
  EXPECT_EQ(c.sinusoidal_frequencies, SinusoidalFrequencies::Vaswani);
  EXPECT_EQ(c.position_offset, 0);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_layout, RopeLayout::Half);
  EXPECT_TRUE(c.share_encoder_decoder_embeddings);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.layer_norm_eps, 1e-5);
  EXPECT_EQ(c.pad_token_id, 1);
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.decoder_start_token_id, 3);
  EXPECT_EQ(c.encoder_head_dim(), 16);
  EXPECT_EQ(c.decoder_head_dim, 8);
}

TEST(Config, FullConfigRoundTripsThroughToJson) {
  json full = minimal();
  full["decoder_vocab_size"] = 90;
  full["share_encoder_decoder_embeddings"] = false;
  full["tie_word_embeddings"] = false;
  full["activation_function"] = "gelu";
  full["normalize_before"] = true;
  full["scale_embedding"] = true;
  full["layernorm_embedding"] = true;
  full["position_encoding"] = "rope";
  full["sinusoidal_layout"] = "split";
  full["sinusoidal_frequencies"] = "tensor2tensor";
  full["position_offset"] = 2;
  full["rope_theta"] = 500000.0;
  full["rope_layout"] = "interleaved";
  full["relative_attention_num_buckets"] = 16;
  full["relative_attention_max_distance"] = 64;
  full["layer_norm_eps"] = 1e-6;
  full["bos_token_id"] = 4;

  const ModelConfig c = ModelConfig::from_json(full, "config.json");
  const json emitted = c.to_json();
  // Every key we set comes back with the same value, and nothing else is missing.
  for (const auto& [key, value] : full.items()) {
    ASSERT_TRUE(emitted.contains(key)) << key;
    EXPECT_EQ(emitted[key], value) << key;
  }
  EXPECT_EQ(emitted["model_type"], "ordo");
  const ModelConfig again = ModelConfig::from_json(emitted, "config.json");
  EXPECT_EQ(again.to_json(), emitted);
  EXPECT_EQ(again.activation_function, Activation::Gelu);
  EXPECT_EQ(again.position_encoding, PositionEncoding::Rope);
  EXPECT_EQ(again.sinusoidal_layout, SinusoidalLayout::Split);
  EXPECT_EQ(again.sinusoidal_frequencies, SinusoidalFrequencies::Tensor2Tensor);
  EXPECT_EQ(again.rope_layout, RopeLayout::Interleaved);
  EXPECT_EQ(again.bos_token_id, 4);
  EXPECT_EQ(again.decoder_vocab_size, 90);
}

TEST(Config, DefaultsRoundTripThroughToJson) {
  const json emitted = ModelConfig::from_json(minimal(), "config.json").to_json();
  EXPECT_EQ(emitted["position_encoding"], "sinusoidal");
  EXPECT_EQ(emitted["activation_function"], "relu");
  EXPECT_EQ(emitted["decoder_vocab_size"], 100);
  EXPECT_TRUE(emitted["bos_token_id"].is_null());
  EXPECT_EQ(ModelConfig::from_json(emitted, "config.json").to_json(), emitted);
}

TEST(Config, ActivationsTakeHuggingFaceNames) {
  for (const auto& [name, activation] : std::vector<std::pair<std::string, Activation>>{
           {"relu", Activation::Relu}, {"gelu", Activation::Gelu}, {"swish", Activation::Silu}, {"silu", Activation::Silu}}) {
    json config = minimal();
    config["activation_function"] = name;
    const ModelConfig c = ModelConfig::from_json(config, "config.json");
    EXPECT_EQ(c.activation_function, activation) << name;
    // What to_json writes reads back as the same activation.
    EXPECT_EQ(ModelConfig::from_json(c.to_json(), "config.json").activation_function, activation) << name;
  }
}

// gelu_new is the tanh approximation: silently mapping it to erf gelu would be wrong.
TEST(Config, OtherActivationsAreRejectedListingTheSupportedNames) {
  for (const char* name : {"tanh", "gelu_new", "RELU", ""}) {
    const std::string message = error_with("activation_function", name);
    std::string quoted = "unknown value \"";  // (not "..." + name: g++ 12 warns -Wrestrict)
    quoted.append(name).append("\"");
    EXPECT_THAT(message, HasSubstr("key 'activation_function': " + quoted));
    EXPECT_THAT(message, HasSubstr("expected one of: relu, gelu, swish, silu"));
  }
}

TEST(Config, SiluIsSwish) {
  json config = minimal();
  config["activation_function"] = "silu";
  const ModelConfig c = ModelConfig::from_json(config, "config.json");
  EXPECT_EQ(c.activation_function, Activation::Silu);
  EXPECT_EQ(c.to_json()["activation_function"], "swish");
}

TEST(Config, UnknownKeysAreIgnored) {
  json config = minimal();
  config["architectures"] = {"MarianMTModel"};
  config["torch_dtype"] = "float32";
  config["dropout"] = 0.1;
  const ModelConfig c = ModelConfig::from_json(config, "config.json");
  EXPECT_FALSE(c.to_json().contains("architectures"));
  EXPECT_FALSE(c.to_json().contains("dropout"));
}

TEST(Config, ZeroLayersAreAllowed) {
  json config = minimal();
  config["encoder_layers"] = 0;
  config["decoder_layers"] = 0;
  EXPECT_NO_THROW(ModelConfig::from_json(config, "config.json"));
}

TEST(Config, EachMissingRequiredKeyIsNamed) {
  const json required = minimal();  // items() refers to it: must outlive the loop
  for (const auto& [key, value] : required.items()) {
    json config = minimal();
    config.erase(key);
    const std::string message =
        error_message([&] { ModelConfig::from_json(config, "dir/config.json"); });
    EXPECT_THAT(message, HasSubstr("dir/config.json: missing required key '" + key + "'"));
  }
}

TEST(Config, WrongJsonTypesNameTheKey) {
  EXPECT_THAT(error_with("d_model", "512"), HasSubstr("key 'd_model': expected an integer"));
  EXPECT_THAT(error_with("d_model", 512.0), HasSubstr("key 'd_model': expected an integer"));
  EXPECT_THAT(error_with("vocab_size", nullptr), HasSubstr("key 'vocab_size'"));
  EXPECT_THAT(error_with("eos_token_id", 1.5), HasSubstr("key 'eos_token_id'"));
  EXPECT_THAT(error_with("position_offset", true), HasSubstr("key 'position_offset'"));
  EXPECT_THAT(error_with("normalize_before", 1), HasSubstr("key 'normalize_before': expected true or false"));
  EXPECT_THAT(error_with("tie_word_embeddings", "true"), HasSubstr("key 'tie_word_embeddings'"));
  EXPECT_THAT(error_with("rope_theta", "1e4"), HasSubstr("key 'rope_theta': expected a number"));
  EXPECT_THAT(error_with("layer_norm_eps", json::array()), HasSubstr("key 'layer_norm_eps'"));
  EXPECT_THAT(error_with("position_encoding", 1), HasSubstr("key 'position_encoding': expected a string"));
  EXPECT_THAT(error_with("activation_function", false), HasSubstr("key 'activation_function'"));
  EXPECT_THAT(error_with("model_type", 3), HasSubstr("key 'model_type'"));
  EXPECT_THAT(error_with("bos_token_id", "<s>"), HasSubstr("key 'bos_token_id'"));
  EXPECT_THAT(error_with("pad_token_id", 1ll << 40), HasSubstr("key 'pad_token_id'"));
  EXPECT_THAT(error_with("d_model", 18446744073709551615ull), HasSubstr("key 'd_model'"));
}

TEST(Config, RelativeSchemesReadTheirKeys) {
  json config = minimal();
  config["position_encoding"] = "alibi";
  EXPECT_EQ(ModelConfig::from_json(config, "c").position_encoding, PositionEncoding::Alibi);
  config["position_encoding"] = "t5_relative";
  const ModelConfig t5 = ModelConfig::from_json(config, "c");
  EXPECT_EQ(t5.position_encoding, PositionEncoding::T5Relative);
  EXPECT_EQ(t5.relative_attention_num_buckets, 32);  // T5's defaults
  EXPECT_EQ(t5.relative_attention_max_distance, 128);
}

TEST(Config, UnusableT5BucketsNameTheKey) {
  json t5 = minimal();
  t5["position_encoding"] = "t5_relative";
  EXPECT_THAT(error_with("relative_attention_num_buckets", 3, t5),
              HasSubstr("key 'relative_attention_num_buckets': t5_relative needs at least 4 buckets, got 3"));
  EXPECT_THAT(error_with("relative_attention_max_distance", 16, t5),
              HasSubstr("key 'relative_attention_max_distance': must be more than "
                        "relative_attention_num_buckets / 2 = 16, got 16"));
  EXPECT_THAT(error_with("relative_attention_num_buckets", -1, t5), HasSubstr("relative_attention_num_buckets"));
  // Other schemes never read the table, so its keys are not held against them.
  json sinusoidal = minimal();
  sinusoidal["relative_attention_num_buckets"] = 2;
  EXPECT_NO_THROW(ModelConfig::from_json(sinusoidal, "c"));
}

// Issue 20: every value that sizes an allocation or a loop has a bound; the T5 keys of a
// t5_relative model are sizes too (2^62 once crashed T5RelativeBias).
TEST(Config, T5KeysAreBoundedLikeEverySize) {
  json t5 = minimal();
  t5["position_encoding"] = "t5_relative";
  EXPECT_THAT(error_with("relative_attention_max_distance", std::int64_t{1} << 62, t5),
              HasSubstr("key 'relative_attention_max_distance': is 4611686018427387904, more than ordo supports "
                        "(16777216)"));
  EXPECT_THAT(error_with("relative_attention_num_buckets", std::int64_t{1} << 40, t5),
              HasSubstr("key 'relative_attention_num_buckets': is 1099511627776, more than ordo supports"));
  EXPECT_NO_THROW(ModelConfig::from_json(
      [&] { json c = t5; c["relative_attention_max_distance"] = 1 << 24; return c; }(), "c"));
}

// LLaMA's eos_token_id list is searched for every candidate token: each id once, so the
// list is never longer than the vocabulary it indexes.
TEST(Config, LlamaEosListsHoldEachIdOnce) {
  json llama = {{"model_type", "llama"}, {"vocab_size", 30}, {"hidden_size", 16}, {"intermediate_size", 32},
                {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"eos_token_id", json::array({2, 3})}};
  EXPECT_NO_THROW(ModelConfig::from_json(llama, "c"));
  EXPECT_THAT(error_with("eos_token_id", json::array({2, 3, 2}), llama),
              HasSubstr("key 'eos_token_id': token id 2 is listed twice"));
}

TEST(Config, UnknownEnumValuesListTheChoices) {
  EXPECT_THAT(error_with("position_encoding", "sinus"),
              HasSubstr("dir/config.json: key 'position_encoding': unknown value \"sinus\" "
                        "(expected one of: sinusoidal, learned, rope, none, alibi, t5_relative)"));
  EXPECT_THAT(error_with("sinusoidal_layout", "halves"),
              HasSubstr("key 'sinusoidal_layout': unknown value \"halves\" (expected one of: "
                        "interleaved, split)"));
  EXPECT_THAT(error_with("sinusoidal_frequencies", "t2t"),
              HasSubstr("key 'sinusoidal_frequencies': unknown value \"t2t\" (expected one of: "
                        "vaswani, tensor2tensor)"));
  EXPECT_THAT(error_with("rope_layout", "neox"),
              HasSubstr("key 'rope_layout': unknown value \"neox\" (expected one of: half, "
                        "interleaved)"));
  EXPECT_THAT(error_with("activation_function", "gelu_new"),
              HasSubstr("key 'activation_function': unknown value \"gelu_new\" (expected one "
                        "of: relu, gelu, swish, silu)"));
}

TEST(Config, OtherModelTypesSaySupportedTypes) {
  EXPECT_THAT(error_with("model_type", "bart"),
              HasSubstr("key 'model_type': unsupported model type \"bart\" (supported types: "
                        "ordo, llama, marian, t5, mt5, m2m_100)"));
}

TEST(Config, SizesMustBePositive) {
  for (const char* key : {"vocab_size", "d_model", "encoder_attention_heads",
                          "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim",
                          "max_position_embeddings"}) {
    EXPECT_THAT(error_with(key, 0), HasSubstr(std::string("key '") + key + "'")) << key;
    EXPECT_THAT(error_with(key, -4), HasSubstr(std::string("key '") + key + "'")) << key;
  }
  EXPECT_THAT(error_with("decoder_vocab_size", 0), HasSubstr("key 'decoder_vocab_size': must be > 0, got 0"));
  EXPECT_THAT(error_with("encoder_layers", -1), HasSubstr("key 'encoder_layers': must be >= 0, got -1"));
  EXPECT_THAT(error_with("decoder_layers", -1), HasSubstr("key 'decoder_layers': must be >= 0, got -1"));
  EXPECT_THAT(error_with("position_offset", -2), HasSubstr("key 'position_offset': must be >= 0, got -2"));
  EXPECT_THAT(error_with("rope_theta", 0.0), HasSubstr("key 'rope_theta': must be a finite number > 0"));
  EXPECT_THAT(error_with("layer_norm_eps", -1e-5), HasSubstr("key 'layer_norm_eps'"));
  EXPECT_THAT(error_with("layer_norm_eps", 0), HasSubstr("key 'layer_norm_eps'"));
}

// Huge sizes would overflow element counts long before they fit in memory; tiny eps
// would silently become 0 in the float engine.
TEST(Config, SizesAndEpsMustFitTheEngine) {
  EXPECT_THAT(error_with("d_model", std::int64_t{1} << 40),
              HasSubstr("key 'd_model': is 1099511627776, more than ordo supports (16777216)"));
  EXPECT_THAT(error_with("position_offset", std::int64_t{1} << 30), HasSubstr("key 'position_offset'"));
  EXPECT_THAT(error_with("layer_norm_eps", 1e-60), HasSubstr("key 'layer_norm_eps': is too small for float32"));
  EXPECT_THAT(error_with("layer_norm_eps", 1e300), HasSubstr("key 'layer_norm_eps': is 1"));
}

TEST(Config, DModelMustDivideByHeads) {
  EXPECT_THAT(error_with("encoder_attention_heads", 5),
              HasSubstr("key 'encoder_attention_heads': d_model=64 is not divisible by "
                        "encoder_attention_heads=5"));
  EXPECT_THAT(error_with("decoder_attention_heads", 3),
              HasSubstr("key 'decoder_attention_heads': d_model=64 is not divisible by "
                        "decoder_attention_heads=3"));
}

TEST(Config, TokenIdsMustBeInsideTheirVocabulary) {
  EXPECT_THAT(error_with("eos_token_id", 100),
              HasSubstr("key 'eos_token_id': token id 100 is outside [0, decoder_vocab_size=100)"));
  EXPECT_THAT(error_with("decoder_start_token_id", -1),
              HasSubstr("key 'decoder_start_token_id': token id -1 is outside"));
  EXPECT_THAT(error_with("pad_token_id", 100), HasSubstr("key 'pad_token_id'"));

  // Separate vocabularies: ids are checked against the one they index.
  json split = minimal();
  split["share_encoder_decoder_embeddings"] = false;
  split["decoder_vocab_size"] = 10;
  EXPECT_THAT(error_with("eos_token_id", 50, split),
              HasSubstr("key 'eos_token_id': token id 50 is outside [0, decoder_vocab_size=10)"));
  EXPECT_THAT(error_with("pad_token_id", 50, split),
              HasSubstr("key 'pad_token_id': token id 50 is outside [0, decoder_vocab_size=10)"));
  split["decoder_vocab_size"] = 200;
  EXPECT_NO_THROW(ModelConfig::from_json(split, "config.json"));
  split["decoder_start_token_id"] = 150;  // only the decoder vocabulary matters
  EXPECT_NO_THROW(ModelConfig::from_json(split, "config.json"));
  EXPECT_THAT(error_with("pad_token_id", 150, split),
              HasSubstr("key 'pad_token_id': token id 150 is outside [0, vocab_size=100)"));
}

TEST(Config, SinusoidalNeedsAnEvenDModel) {
  json config = minimal();
  config["d_model"] = 63;
  config["encoder_attention_heads"] = 1;
  config["decoder_attention_heads"] = 1;
  EXPECT_THAT(error_with("position_encoding", "sinusoidal", config),
              HasSubstr("key 'd_model': sinusoidal positions need an even d_model, got 63"));
  config["position_encoding"] = "learned";
  EXPECT_NO_THROW(ModelConfig::from_json(config, "config.json"));
}

TEST(Config, RopeNeedsAnEvenHeadDim) {
  json config = minimal();
  config["position_encoding"] = "rope";
  EXPECT_THAT(error_with("decoder_attention_heads", 64, config),  // head_dim 1
              HasSubstr("key 'decoder_attention_heads': rope needs an even head dimension"));
  EXPECT_THAT(error_with("encoder_attention_heads", 64, config),
              HasSubstr("key 'encoder_attention_heads': rope needs an even head dimension"));
}

TEST(Config, SharedEmbeddingsNeedOneVocabulary) {
  EXPECT_THAT(error_with("decoder_vocab_size", 90),
              HasSubstr("key 'share_encoder_decoder_embeddings': true, but vocab_size=100 "
                        "differs from decoder_vocab_size=90"));
}

TEST(Config, TopLevelMustBeAnObject) {
  EXPECT_THAT(error_message([] { ModelConfig::from_json(json::array(), "dir/config.json"); }),
              HasSubstr("dir/config.json: expected a JSON object"));
}

TEST(Config, LoadReadsAFileAndNamesItInErrors) {
  const auto dir = temp_dir("config");
  const auto path = dir / "config.json";
  std::ofstream(path) << minimal().dump(2);
  EXPECT_EQ(ModelConfig::load(path).d_model, 64);

  json bad = minimal();
  bad["position_encoding"] = "sinus";
  std::ofstream(path) << bad.dump(2);
  EXPECT_THAT(error_message([&] { ModelConfig::load(path); }),
              HasSubstr(path.string() + ": key 'position_encoding'"));

  std::ofstream(path) << "{\"d_model\": 64,";
  EXPECT_THAT(error_message([&] { ModelConfig::load(path); }),
              HasSubstr(path.string() + ": not valid JSON"));
  std::ofstream(path) << "{\"layer_norm_eps\": 1e999}";  // out of double range
  EXPECT_THAT(error_message([&] { ModelConfig::load(path); }),
              HasSubstr(path.string() + ": not valid JSON"));

  EXPECT_THAT(error_message([&] { ModelConfig::load(dir / "absent.json"); }),
              HasSubstr("absent.json: cannot open"));

  // A config is read whole, so its size is capped before it is read.
  std::filesystem::resize_file(path, (16u << 20) + 1);
  EXPECT_THAT(error_message([&] { ModelConfig::load(path); }),
              HasSubstr(path.string() + ": is 16777217 bytes, more than a config.json can be"));
  std::filesystem::remove_all(dir);
}

// parse() is load() without the file: the same checks on text in memory.
TEST(Config, ParseReadsText) {
  EXPECT_EQ(ModelConfig::parse(minimal().dump(), "mem").d_model, 64);
  EXPECT_THAT(error_message([] { ModelConfig::parse("{\"d_model\": 64,", "mem"); }), HasSubstr("mem: not valid JSON"));
  EXPECT_THAT(error_message([] { ModelConfig::parse(std::string(40, '[') + std::string(40, ']'), "mem"); }),
              HasSubstr("mem: JSON nested more than 32 levels deep"));
}

}  // namespace
}  // namespace ordo
