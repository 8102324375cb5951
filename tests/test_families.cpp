// Model families as data (models/tensor_names.h, models/config.h, models/llama_config.h)
// and weights split over shards (models/shard_index.h): what each family's table
// expands to, what a Hugging Face LLaMA config.json maps to, and every way a config or
// a sharded checkpoint can be wrong, each with a message naming the key or the file.
// The numbers these models compute are checked against PyTorch in
// test_generation_parity.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/score.h"
#include "engine/search.h"
#include "models/loaded_model.h"
#include "models/tensor_names.h"
#include "tests/model_factory.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HasSubstr;
using testing_support::temp_dir;
using testing_support::tiny_config;
using testing_support::write_random_model;

json llama_config() {
  return {{"model_type", "llama"},       {"vocab_size", 30},          {"hidden_size", 16},
          {"intermediate_size", 24},     {"num_hidden_layers", 2},    {"num_attention_heads", 4},
          {"num_key_value_heads", 2},    {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-6},
          {"bos_token_id", 2},           {"eos_token_id", 1},         {"hidden_act", "silu"},
          {"torch_dtype", "float32"}};
}

json with(json config, const json& changes) {
  config.update(changes);
  return config;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string config_error(const json& config) {
  return error_of([&] { ModelConfig::from_json(config, "dir/config.json"); });
}

std::set<std::string> names_of(const ModelConfig& config) {
  std::set<std::string> names;
  for (const TensorSpec& spec : expected_tensors(config)) names.insert(spec.name);
  return names;
}

// ---------------------------------------------------------------------------------------
// The tables.

TEST(Families, LlamaTableIsHuggingFacesLayout) {
  const ModelConfig c = ModelConfig::from_json(with(llama_config(), {{"num_hidden_layers", 1}}), "config.json");
  EXPECT_EQ(names_of(c), (std::set<std::string>{
                             "model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
                             "model.layers.0.input_layernorm.weight", "model.layers.0.self_attn.q_proj.weight",
                             "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
                             "model.layers.0.self_attn.o_proj.weight", "model.layers.0.post_attention_layernorm.weight",
                             "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
                             "model.layers.0.mlp.down_proj.weight"}));
  // Shapes: K/V have num_key_value_heads x head_dim rows.
  for (const TensorSpec& spec : expected_tensors(c)) {
    if (spec.name.ends_with("k_proj.weight")) {
      EXPECT_EQ(spec.shape, (Shape{8, 16})) << spec.shape_meaning;
    }
    if (spec.name.ends_with("q_proj.weight")) {
      EXPECT_EQ(spec.shape, (Shape{16, 16}));
    }
    if (spec.name.ends_with("gate_proj.weight")) {
      EXPECT_EQ(spec.shape, (Shape{24, 16}));
    }
    if (spec.name.ends_with("down_proj.weight")) {
      EXPECT_EQ(spec.shape, (Shape{16, 24}));
    }
  }
  // Tied: no lm_head. Biases where the config asks for them.
  const ModelConfig tied = ModelConfig::from_json(
      with(llama_config(), {{"num_hidden_layers", 1}, {"tie_word_embeddings", true}, {"attention_bias", true},
                            {"mlp_bias", true}}),
      "config.json");
  const auto names = names_of(tied);
  EXPECT_FALSE(names.contains("lm_head.weight"));
  for (const char* bias : {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
                           "self_attn.o_proj.bias", "mlp.gate_proj.bias", "mlp.up_proj.bias", "mlp.down_proj.bias"})
    EXPECT_TRUE(names.contains(std::string("model.layers.0.") + bias)) << bias;
  EXPECT_EQ(names.size(), 18u);
}

TEST(Families, LlamaHeadDimMayDifferFromHiddenOverHeads) {
  const ModelConfig c = ModelConfig::from_json(with(llama_config(), {{"head_dim", 6}}), "config.json");
  for (const TensorSpec& spec : expected_tensors(c)) {
    if (spec.name.ends_with("q_proj.weight")) {
      EXPECT_EQ(spec.shape, (Shape{24, 16}));
    }
    if (spec.name.ends_with("k_proj.weight")) {
      EXPECT_EQ(spec.shape, (Shape{12, 16}));
    }
    if (spec.name.ends_with("o_proj.weight")) {
      EXPECT_EQ(spec.shape, (Shape{16, 24}));
    }
  }
}

TEST(Families, DecoderOnlyOrdoModelsHaveNoEncoderTensors) {
  json config = tiny_config();
  config["encoder_layers"] = 0;
  config.erase("encoder_attention_heads");
  config.erase("encoder_ffn_dim");
  config.erase("decoder_start_token_id");
  config["position_encoding"] = "learned";
  config["normalize_before"] = true;
  config["num_key_value_heads"] = 1;
  const ModelConfig c = ModelConfig::from_json(config, "config.json");
  EXPECT_FALSE(c.has_encoder());
  EXPECT_EQ(c.grouped_query_ratio(), 2);
  for (const std::string& name : names_of(c)) {
    EXPECT_EQ(name.find("encoder"), std::string::npos) << name;  // no encoder, no encoder_attn
  }
  EXPECT_TRUE(names_of(c).contains("model.decoder.embed_positions.weight"));
  EXPECT_TRUE(names_of(c).contains("model.decoder.layer_norm.weight"));
  // The encoder-decoder table is untouched: cross-attention in every decoder layer.
  EXPECT_TRUE(names_of(ModelConfig::from_json(tiny_config(), "c")).contains("model.decoder.layers.1.encoder_attn.k_proj.weight"));
}

TEST(Families, LlamaConfigMapsOntoTheEngine) {
  const ModelConfig c =
      ModelConfig::from_json(with(llama_config(), {{"eos_token_id", json::array({1, 3})}, {"rope_theta", 500000.0}}),
                             "config.json");
  EXPECT_EQ(c.family, Family::Llama);
  EXPECT_FALSE(c.has_encoder());
  EXPECT_EQ(c.d_model, 16);
  EXPECT_EQ(c.decoder_ffn_dim, 24);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.decoder_head_dim, 4);
  EXPECT_EQ(c.norm_kind, NormKind::RmsNorm);
  EXPECT_EQ(c.feed_forward_kind, FeedForwardKind::Gated);
  EXPECT_EQ(c.activation_function, Activation::Silu);
  EXPECT_TRUE(c.normalize_before);
  EXPECT_EQ(c.position_encoding, PositionEncoding::Rope);
  EXPECT_EQ(c.rope_layout, RopeLayout::Half);
  EXPECT_EQ(c.position_offset, 0);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_EQ(c.other_eos_token_ids, std::vector<int>{3});
  EXPECT_EQ(c.bos_token_id, 2);
  EXPECT_EQ(c.pad_token_id, 1);  // none given: eos pads (padding rows are never read)
}

// ---------------------------------------------------------------------------------------
// Bad configs: one line naming the key.

TEST(Families, UnsupportedLlamaSettingsAreRefusedByName) {
  EXPECT_THAT(config_error(with(llama_config(), {{"hidden_act", "gelu"}})),
              HasSubstr("dir/config.json: key 'hidden_act': unsupported activation \"gelu\""));
  EXPECT_THAT(config_error(with(llama_config(), {{"rope_scaling", {{"type", "longrope"}, {"factor", 2.0}}}})),
              HasSubstr("key 'rope_scaling.type': longrope is not supported"));
  EXPECT_NO_THROW(ModelConfig::from_json(with(llama_config(), {{"rope_scaling", nullptr}}), "c"));
  EXPECT_THAT(config_error(with(llama_config(), {{"num_key_value_heads", 3}})),
              HasSubstr("key 'num_key_value_heads': num_attention_heads=4 is not divisible by num_key_value_heads=3"));
  EXPECT_THAT(config_error(with(llama_config(), {{"num_attention_heads", 3}, {"num_key_value_heads", 3}})),
              HasSubstr("hidden_size=16 is not divisible by num_attention_heads=3"));
  EXPECT_THAT(config_error(with(llama_config(), {{"eos_token_id", json::array({1, 99})}})),
              HasSubstr("key 'eos_token_id': token id 99 is outside [0, vocab_size=30)"));
  EXPECT_THAT(config_error(with(llama_config(), {{"head_dim", 5}})), HasSubstr("RoPE needs an even head dimension"));
  json missing = llama_config();
  missing.erase("hidden_size");
  EXPECT_THAT(config_error(missing), HasSubstr("missing required key 'hidden_size'"));
}

TEST(Families, OrdoGroupedQueryHeadsMustDivideTheHeads) {
  EXPECT_THAT(config_error(with(tiny_config(), {{"num_key_value_heads", 3}})),
              HasSubstr("key 'num_key_value_heads': decoder_attention_heads=2 is not divisible by num_key_value_heads=3"));
  EXPECT_THAT(config_error(with(tiny_config(), {{"num_key_value_heads", 0}})),
              HasSubstr("key 'num_key_value_heads': must be > 0"));
}

// ---------------------------------------------------------------------------------------
// Loading: a LLaMA directory as published, whole or in shards.

// Splits dir/model.safetensors into `shards` files and an index, as Hugging Face does.
void shard(const fs::path& dir, int shards, const std::function<void(json&)>& edit_index = {},
           const std::function<void(std::vector<std::vector<NamedTensor>>&)>& edit_shards = {}) {
  const SafetensorsFile whole = SafetensorsFile::open(dir / "model.safetensors");
  std::vector<std::vector<NamedTensor>> parts(static_cast<std::size_t>(shards));
  std::size_t i = 0;
  for (const TensorInfo& info : whole.tensors()) {
    std::vector<float> storage;
    const TensorView view = whole.as_float32(info, storage);
    parts[i++ % parts.size()].push_back({info.name, info.shape, std::vector<float>(view.data(), view.data() + view.size())});
  }
  if (edit_shards) edit_shards(parts);
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  for (std::size_t s = 0; s < parts.size(); ++s) {
    const std::string name = "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(parts.size()) + ".safetensors";
    write_safetensors_f32(dir / name, parts[s]);
    for (const NamedTensor& t : parts[s]) index["weight_map"][t.name] = name;
  }
  if (edit_index) edit_index(index);
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
  fs::remove(dir / "model.safetensors");
}

std::vector<float> first_logprobs(const LoadedModel& model) {
  return score_target(model.transformer(), {}, std::vector<int>{2, 5, 7, 9, 1});
}

TEST(Families, ShardedWeightsLoadAsOneModel) {
  const auto dir = temp_dir("families");
  write_random_model(dir, llama_config(), 3);
  const auto single = LoadedModel::load(dir);
  const std::vector<float> want = first_logprobs(*single);
  shard(dir, 3);
  const auto sharded = LoadedModel::load(dir);
  EXPECT_EQ(sharded->weights().files().size(), 3u);
  EXPECT_EQ(first_logprobs(*sharded), want);  // the same weights: the same numbers, bit for bit
  EXPECT_THAT(sharded->weights().source(), HasSubstr("model.safetensors.index.json"));
  fs::remove_all(dir);
}

TEST(Families, BadShardIndexesSayWhatIsWrong) {
  const auto load_error = [](const std::function<void(json&)>& edit_index,
                             const std::function<void(std::vector<std::vector<NamedTensor>>&)>& edit_shards = {}) {
    const auto dir = temp_dir("families");
    write_random_model(dir, llama_config(), 4);
    shard(dir, 2, edit_index, edit_shards);
    const std::string message = error_of([&] { LoadedModel::load(dir); });
    fs::remove_all(dir);
    return message;
  };
  // A shard missing.
  EXPECT_THAT(load_error([](json& index) { index["weight_map"]["model.norm.weight"] = "model-00009-of-00009.safetensors"; }),
              HasSubstr("names shard \"model-00009-of-00009.safetensors\", which is not in"));
  // Paths that would leave the model directory.
  for (const char* outside : {"../model-00001-of-00002.safetensors", "/etc/passwd", "sub/x.safetensors", "..", ""}) {
    SCOPED_TRACE(outside);
    EXPECT_THAT(load_error([&](json& index) { index["weight_map"]["model.norm.weight"] = outside; }),
                HasSubstr("which is not a file name inside the model directory"));
  }
  // A tensor in two shards.
  EXPECT_THAT(load_error({}, [](auto& parts) { parts[1].push_back(parts[0].front()); }),
              HasSubstr("is in two shards"));
  // The index and the shards disagree.
  EXPECT_THAT(load_error([](json& index) { index["weight_map"].erase("model.norm.weight"); }),
              HasSubstr("holds tensor 'model.norm.weight', which weight_map does not list"));
  EXPECT_THAT(load_error([](json& index) { index["weight_map"]["model.extra.weight"] = "model-00001-of-00002.safetensors"; }),
              HasSubstr("weight_map puts tensor 'model.extra.weight' in \"model-00001-of-00002.safetensors\", which does not hold it"));
  EXPECT_THAT(load_error([](json& index) { index.erase("weight_map"); }), HasSubstr("has no \"weight_map\" object"));
  // A shard is validated like a single file: a tensor the config needs, missing.
  EXPECT_THAT(load_error([](json& index) { index["weight_map"].erase("model.norm.weight"); },
                         [](auto& parts) {
                           for (auto& part : parts)
                             std::erase_if(part, [](const NamedTensor& t) { return t.name == "model.norm.weight"; });
                         }),
              HasSubstr("missing tensor 'model.norm.weight' of shape [hidden_size=16]"));
}

TEST(Families, TextNeedsASentencePieceTokenizer) {
  const auto dir = temp_dir("families");
  write_random_model(dir, llama_config(), 5);
  std::ofstream(dir / "tokenizer.json") << "{}";
  const auto model = LoadedModel::load(dir);
  EXPECT_THAT(error_of([&] { model->tokenize_prompt("Die Katze", true); }),
              HasSubstr("has only tokenizer.json (Hugging Face tokenizers), and ordo reads the text of a "
                        "model_type \"llama\" directory with SentencePiece: tokenizer.model (add the model's "
                        "tokenizer.model from its repository"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ordo
