// The Marian family (model_type "marian", Hugging Face's MarianMTModel, the opus-mt
// layout): its config.json (models/marian_config.h), its tensor table, its positions,
// its tokenizer files (source.spm, target.spm, vocab.json; tokenizer/piece_vocabulary.h)
// and every way they can be wrong, each one line naming the file and the key.
//
// MarianParity.* compares the oracle's Marian models (tools/oracle/make_parity_models.py,
// "marian_models" of its index; tools/oracle/ordo_torch/marian.py is written from
// transformers' modeling_marian.py) with the tolerances test_parity.cpp derives: log-probs
// and encoder outputs within 1e-4 absolute (float32 against the oracle's float64),
// greedy and beam ids identical (cases are kept only with margins >= 1e-2 and 1e-3),
// beam scores within 1e-4. Token ids must be identical to the SentencePiece Python
// module's pieces mapped through vocab.json, as MarianTokenizer maps them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/decode_inputs.h"
#include "engine/error.h"
#include "engine/score.h"
#include "engine/search.h"
#include "models/loaded_model.h"
#include "models/tensor_names.h"
#include "ordo/ordo.hpp"
#include "tests/cli_runner.h"
#include "tests/greedy.h"
#include "tests/model_factory.h"
#include "tests/parity_support.h"
#include "tests/reference.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HasSubstr;
using testing_support::parity_dir;
using testing_support::temp_dir;
using testing_support::write_random_model;
const auto& read_json = testing_support::read_oracle_json;

// An opus-mt config.json as save_pretrained writes it (every MarianConfig key, and what
// older transformers versions added), made small.
json opus_config() {
  return json::parse(R"({
    "_name_or_path": "Helsinki-NLP/opus-mt-en-de", "activation_dropout": 0.0,
    "activation_function": "swish", "add_bias_logits": false, "add_final_layer_norm": false,
    "architectures": ["MarianMTModel"], "attention_dropout": 0.0, "bad_words_ids": [[29]],
    "bos_token_id": 0, "classif_dropout": 0.0, "classifier_dropout": 0.0, "d_model": 16,
    "decoder_attention_heads": 4, "decoder_ffn_dim": 24, "decoder_layerdrop": 0.0,
    "decoder_layers": 2, "decoder_start_token_id": 29, "decoder_vocab_size": 30, "dropout": 0.1,
    "encoder_attention_heads": 2, "encoder_ffn_dim": 32, "encoder_layerdrop": 0.0,
    "encoder_layers": 2, "eos_token_id": 0, "forced_eos_token_id": 0, "gradient_checkpointing": false,
    "id2label": {"0": "LABEL_0"}, "init_std": 0.02, "is_encoder_decoder": true, "label2id": {"LABEL_0": 0},
    "max_length": 512, "max_position_embeddings": 20, "model_type": "marian", "normalize_before": false,
    "normalize_embedding": false, "num_beams": 4, "num_hidden_layers": 2, "pad_token_id": 29,
    "scale_embedding": true, "share_encoder_decoder_embeddings": true, "static_position_embeddings": true,
    "torch_dtype": "float16", "transformers_version": "4.22.0.dev0", "use_cache": true, "vocab_size": 30})");
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

std::set<std::string> names_of(const ModelConfig& config, bool required_only = false) {
  std::set<std::string> names;
  for (const TensorSpec& spec : expected_tensors(config))
    if (spec.required || !required_only) names.insert(spec.name);
  return names;
}

// ---------------------------------------------------------------------------------------
// config.json and the tensor table.

TEST(Marian, ConfigAsSavePretrainedWritesItMapsOntoTheEngine) {
  const ModelConfig c = ModelConfig::from_json(opus_config(), "config.json");
  EXPECT_EQ(c.family, Family::Marian);
  EXPECT_EQ(c.vocab_size, 30);
  EXPECT_EQ(c.decoder_vocab_size, 30);
  EXPECT_EQ(c.d_model, 16);
  EXPECT_EQ(c.encoder_attention_heads, 2);
  EXPECT_EQ(c.decoder_attention_heads, 4);
  EXPECT_EQ(c.encoder_ffn_dim, 32);
  EXPECT_EQ(c.decoder_ffn_dim, 24);
  EXPECT_EQ(c.activation_function, Activation::Silu);
  EXPECT_FALSE(c.normalize_before);
  EXPECT_FALSE(c.layernorm_embedding);
  EXPECT_TRUE(c.scale_embedding);
  EXPECT_EQ(c.position_encoding, PositionEncoding::Sinusoidal);
  EXPECT_EQ(c.sinusoidal_layout, SinusoidalLayout::Split);
  EXPECT_EQ(c.sinusoidal_frequencies, SinusoidalFrequencies::Vaswani);
  EXPECT_EQ(c.position_offset, 0);
  EXPECT_TRUE(c.positions_bounded);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-5);
  EXPECT_EQ(c.pad_token_id, 29);
  EXPECT_EQ(c.decoder_start_token_id, 29);
  EXPECT_EQ(c.eos_token_id, 0);
  EXPECT_TRUE(c.share_encoder_decoder_embeddings);
  EXPECT_TRUE(c.tie_word_embeddings);  // PretrainedConfig's default

  // Absent keys take MarianConfig's defaults (configuration_marian.py).
  const ModelConfig d = ModelConfig::from_json({{"model_type", "marian"}}, "config.json");
  EXPECT_EQ(d.vocab_size, 58101);
  EXPECT_EQ(d.d_model, 1024);
  EXPECT_EQ(d.encoder_layers, 12);
  EXPECT_EQ(d.decoder_attention_heads, 16);
  EXPECT_EQ(d.decoder_ffn_dim, 4096);
  EXPECT_EQ(d.max_position_embeddings, 1024);
  EXPECT_EQ(d.activation_function, Activation::Gelu);
  EXPECT_EQ(d.pad_token_id, 58100);
  EXPECT_EQ(d.decoder_start_token_id, 58100);
  EXPECT_EQ(d.eos_token_id, 0);
  EXPECT_FALSE(d.scale_embedding);

  // inspect shows the family's own keys, and they read back to the same config.
  const json shown = c.to_json();
  for (const char* internal : {"position_encoding", "sinusoidal_layout", "normalize_before", "norm", "head_dim"})
    EXPECT_FALSE(shown.contains(internal)) << internal;
  EXPECT_EQ(shown.at("activation_function"), "swish");
  EXPECT_EQ(shown.at("share_encoder_decoder_embeddings"), true);
  const ModelConfig again = ModelConfig::from_json(shown, "shown");
  EXPECT_EQ(again.to_json(), shown);
}

TEST(Marian, TableIsSavePretrainedsLayout) {
  const ModelConfig shared = ModelConfig::from_json(with(opus_config(), {{"decoder_layers", 1}, {"encoder_layers", 1}}), "c");
  const auto required = names_of(shared, true);
  EXPECT_TRUE(required.contains("model.shared.weight"));
  for (const char* absent : {"lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                             "model.encoder.layer_norm.weight", "model.encoder.layernorm_embedding.weight"})
    EXPECT_FALSE(names_of(shared).contains(absent)) << absent;
  // Optional: what save_pretrained may or may not have written.
  for (const char* optional : {"final_logits_bias", "model.encoder.embed_positions.weight",
                               "model.decoder.embed_positions.weight"}) {
    EXPECT_TRUE(names_of(shared).contains(optional)) << optional;
    EXPECT_FALSE(required.contains(optional)) << optional;
  }
  for (const TensorSpec& spec : expected_tensors(shared)) {
    if (spec.name == "model.decoder.embed_positions.weight") {
      EXPECT_EQ(spec.shape, (Shape{20, 16}));
    }
    if (spec.name == "final_logits_bias") {
      EXPECT_EQ(spec.shape, (Shape{1, 30}));
    }
  }
  EXPECT_EQ(required.size(), 1u + 16 + 26);  // shared, an encoder layer, a decoder layer

  const ModelConfig separate = ModelConfig::from_json(
      with(opus_config(), {{"share_encoder_decoder_embeddings", false}, {"tie_word_embeddings", false}}), "c");
  const auto names = names_of(separate, true);
  for (const char* present : {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"})
    EXPECT_TRUE(names.contains(present)) << present;
  EXPECT_FALSE(names.contains("model.shared.weight"));
}

TEST(Marian, AnEncodersOwnTableIsOnlyLookedUpWhenTheDecodersIsTiedToTheHead) {
  // Read from the file a row at a time (models/stored_matrix.h), unless it multiplies.
  const auto lookup_only = [](const ModelConfig& config) {
    std::map<std::string, bool> result;
    for (const TensorSpec& spec : expected_tensors(config))
      if (spec.name.find("embed_tokens") != std::string::npos || spec.name == "model.shared.weight")
        result[spec.name] = spec.lookup_only;
    return result;
  };
  const ModelConfig separate_tied = ModelConfig::from_json(
      with(opus_config(), {{"share_encoder_decoder_embeddings", false}, {"tie_word_embeddings", true}}), "c");
  EXPECT_EQ(lookup_only(separate_tied), (std::map<std::string, bool>{{"model.decoder.embed_tokens.weight", false},
                                                                     {"model.encoder.embed_tokens.weight", true}}));
  const ModelConfig separate_untied = ModelConfig::from_json(
      with(opus_config(), {{"share_encoder_decoder_embeddings", false}, {"tie_word_embeddings", false}}), "c");
  EXPECT_EQ(lookup_only(separate_untied), (std::map<std::string, bool>{{"model.decoder.embed_tokens.weight", true},
                                                                       {"model.encoder.embed_tokens.weight", true}}));
  const ModelConfig shared_tied = ModelConfig::from_json(opus_config(), "c");
  EXPECT_EQ(lookup_only(shared_tied), (std::map<std::string, bool>{{"model.shared.weight", false}}));
}

TEST(Marian, BadConfigsAreOneLineNamingTheKey) {
  EXPECT_THAT(config_error(with(opus_config(), {{"d_model", "16"}})),
              HasSubstr("dir/config.json: key 'd_model': expected an integer, got a string (\"16\")"));
  EXPECT_THAT(config_error(with(opus_config(), {{"scale_embedding", "yes"}})),
              HasSubstr("key 'scale_embedding': expected true or false"));
  EXPECT_THAT(config_error(with(opus_config(), {{"activation_function", "quick_gelu"}})),
              HasSubstr("key 'activation_function': unknown value \"quick_gelu\""));
  EXPECT_EQ(ModelConfig::from_json(with(opus_config(), {{"activation_function", "gelu_new"}}), "c").activation_function,
            Activation::GeluTanh);
  EXPECT_THAT(config_error(with(opus_config(), {{"decoder_vocab_size", 31}})),
              HasSubstr("key 'decoder_vocab_size': 31 differs from vocab_size=30"));
  EXPECT_NO_THROW(ModelConfig::from_json(with(opus_config(), {{"decoder_vocab_size", nullptr}}), "c"));
  EXPECT_THAT(config_error(with(opus_config(), {{"is_encoder_decoder", false}})),
              HasSubstr("key 'is_encoder_decoder': is false"));
  EXPECT_THAT(config_error(with(opus_config(), {{"dropout", "0.1"}})), HasSubstr("key 'dropout': expected a number"));
  EXPECT_THAT(config_error(with(opus_config(), {{"pad_token_id", 30}})),
              HasSubstr("key 'pad_token_id': token id 30 is outside [0, vocab_size=30)"));
  EXPECT_THAT(config_error(with(opus_config(), {{"decoder_attention_heads", 3}})),
              HasSubstr("key 'decoder_attention_heads': d_model=16 is not divisible by decoder_attention_heads=3"));
  EXPECT_THAT(config_error(with(opus_config(), {{"encoder_layers", -1}})), HasSubstr("key 'encoder_layers': must be > 0"));
  EXPECT_THAT(config_error(with(opus_config(), {{"max_position_embeddings", 1e9}})),
              HasSubstr("key 'max_position_embeddings': expected an integer"));
}

// ---------------------------------------------------------------------------------------
// Positions: the table the file holds, else computed alike, bounded either way.

std::vector<float> sinusoid_row(Index position, Index dim) {
  // MarianSinusoidalPositionalEmbedding: sin of every frequency, then cos.
  std::vector<float> row(static_cast<std::size_t>(dim));
  for (Index i = 0; i < dim / 2; ++i) {
    const double angle = static_cast<double>(position) / std::pow(10000.0, 2.0 * static_cast<double>(i) / static_cast<double>(dim));
    row[static_cast<std::size_t>(i)] = static_cast<float>(std::sin(angle));
    row[static_cast<std::size_t>(dim / 2 + i)] = static_cast<float>(std::cos(angle));
  }
  return row;
}

TEST(Marian, PositionsComeFromTheFileOrAreComputedAlike) {
  const json config = opus_config();
  const auto set_table = [](std::vector<NamedTensor>& tensors, float bump) {
    for (NamedTensor& t : tensors)
      if (t.name.ends_with("embed_positions.weight"))
        for (Index p = 0; p < t.shape[0]; ++p) {
          const auto row = sinusoid_row(p, t.shape[1]);
          for (Index j = 0; j < t.shape[1]; ++j)
            t.values[static_cast<std::size_t>(p * t.shape[1] + j)] = row[static_cast<std::size_t>(j)] + bump;
        }
  };
  const auto scores = [&](const std::function<void(std::vector<NamedTensor>&)>& edit) {
    const auto dir = temp_dir("marian");
    write_random_model(dir, config, 3, edit);
    const auto model = LoadedModel::load(dir);
    const std::vector<int> source{3, 4, 5, 6, 0}, target{7, 8, 9, 0};
    auto got = score_target(model->transformer(), source, target);
    // 20 positions: 21 source tokens are refused, as transformers' table refuses them.
    EXPECT_THAT(error_of([&] { score_target(model->transformer(), std::vector<int>(21, 3), target); }),
                HasSubstr("max_position_embeddings=20"));
    fs::remove_all(dir);
    return got;
  };
  const auto computed = scores([](std::vector<NamedTensor>& tensors) {
    std::erase_if(tensors, [](const NamedTensor& t) { return t.name.ends_with("embed_positions.weight"); });
  });
  const auto stored = scores([&](std::vector<NamedTensor>& tensors) { set_table(tensors, 0.0f); });
  const auto shifted = scores([&](std::vector<NamedTensor>& tensors) { set_table(tensors, 0.5f); });
  // The stored sinusoids are the computed ones (float32 either way): the same numbers.
  reference::expect_close(stored, std::vector<double>(computed.begin(), computed.end()), 1e-6, 0.0);
  // Other values in the file are what the model runs on.
  double most = 0;
  for (std::size_t i = 0; i < stored.size(); ++i) most = std::max(most, std::abs(double(stored[i]) - shifted[i]));
  EXPECT_GT(most, 1e-2);
}

// ---------------------------------------------------------------------------------------
// generation_config.json: the defaults the flags override.

// A random opus-style model in a fresh directory; `edit` changes its tensors.
fs::path random_marian(const std::function<void(std::vector<NamedTensor>&)>& edit = {}) {
  const fs::path dir = temp_dir("marian-gen");
  write_random_model(dir, opus_config(), 5, edit);
  return dir;
}

void write_generation_config(const fs::path& dir, const json& config) {
  std::ofstream(dir / "generation_config.json") << config.dump();
}

TEST(Marian, GenerationConfigSuppliesTheDefaults) {
  const fs::path dir = random_marian();
  // No generation_config.json: config.json's generation keys, as from_model_config reads them.
  {
    const auto model = LoadedModel::load(dir);
    const DecodingOptions& d = model->generation().decoding;
    EXPECT_EQ(d.beam_size, 4);
    EXPECT_EQ(d.bad_words_ids, (std::vector<std::vector<int>>{{29}}));
    // max_length 512 counts decoder_start, and 20 positions hold at most 19 generated tokens.
    EXPECT_EQ(d.max_length, 19);
    EXPECT_THAT(model->generation().source, HasSubstr("config.json"));
  }
  write_generation_config(dir, json::parse(R"({"bad_words_ids": [[29], [3, 4]], "num_beams": 3, "max_length": 8,
      "length_penalty": 0.5, "no_repeat_ngram_size": 2, "forced_bos_token_id": null, "decoder_start_token_id": 5,
      "eos_token_id": [0, 7], "do_sample": false})"));
  const auto model = LoadedModel::load(dir);
  const DecodingOptions& d = model->generation().decoding;
  EXPECT_EQ(d.beam_size, 3);
  EXPECT_EQ(d.max_length, 7);
  EXPECT_DOUBLE_EQ(d.length_penalty, 0.5);
  EXPECT_EQ(d.no_repeat_ngram_size, 2);
  EXPECT_EQ(d.bad_words_ids, (std::vector<std::vector<int>>{{29}, {3, 4}}));
  EXPECT_EQ(d.forced_bos_token_id, -1);
  EXPECT_EQ(model->transformer().tokens.decoder_start, 5);
  EXPECT_EQ(model->transformer().tokens.eos, 0);
  EXPECT_EQ(model->transformer().tokens.other_eos, std::vector<int>{7});
  EXPECT_FALSE(model->generation().applied.contains("do_sample"));  // not applied, not shown

  // max_new_tokens counts generated tokens as ordo does (and wins over max_length), up to
  // what the positions hold; forced_bos_token_id forces the first generated token.
  write_generation_config(dir, json::parse(R"({"max_new_tokens": 4, "max_length": 8, "forced_bos_token_id": 6})"));
  EXPECT_EQ(LoadedModel::load(dir)->generation().decoding.max_length, 4);
  EXPECT_EQ(LoadedModel::load(dir)->generation().decoding.forced_bos_token_id, 6);
  write_generation_config(dir, json::parse(R"({"max_new_tokens": 400})"));
  EXPECT_EQ(LoadedModel::load(dir)->generation().decoding.max_length, 19);

  for (const auto& [bad, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"num_beams": "4"})", "generation_config.json: key 'num_beams': expected an integer"},
           {R"({"num_beams": 0})", "key 'num_beams': 0 is outside [1, 1024]"},
           {R"({"bad_words_ids": [[30]]})", "key 'bad_words_ids': 30 is outside [0, 29]"},
           {R"({"bad_words_ids": [29]})", "key 'bad_words_ids': expected a list of non-empty id lists"},
           {R"({"eos_token_id": []})", "key 'eos_token_id': is an empty list"},
           {R"({"length_penalty": "1"})", "key 'length_penalty': expected a number"},
           {R"({"forced_bos_token_id": 30})", "key 'forced_bos_token_id': 30 is outside [0, 29]"},
           {R"({"decoder_start_token_id": -1})", "key 'decoder_start_token_id': -1 is outside [0, 29]"},
           {R"({"no_repeat_ngram_size": 1.5})", "key 'no_repeat_ngram_size': expected an integer"},
           {R"({"max_new_tokens": 0})", "key 'max_new_tokens': 0 is outside [1, 4096]"}}) {
    write_generation_config(dir, json::parse(bad));
    EXPECT_THAT(error_of([&] { LoadedModel::load(dir); }), HasSubstr(message)) << bad;
  }
  std::ofstream(dir / "generation_config.json") << "{";
  EXPECT_THAT(error_of([&] { LoadedModel::load(dir); }), HasSubstr("generation_config.json: not valid JSON"));
  fs::remove_all(dir);
}

// A directory with only pytorch_model.bin is read (tests/test_torch_bin.cpp); a file of
// another format under that name is refused by name.
TEST(Marian, ASafetensorsFileNamedPytorchModelBinIsRefusedByName) {
  const fs::path dir = random_marian();
  fs::rename(dir / "model.safetensors", dir / "pytorch_model.bin");
  EXPECT_THAT(error_of([&] { LoadedModel::load(dir); }),
              HasSubstr("pytorch_model.bin: is not the zip archive torch.save writes (it starts with 0x"));
  fs::remove_all(dir);
}

TEST(Marian, BadWordsAndAForcedFirstTokenAreImpossibleOrForced) {
  const fs::path dir = random_marian();
  fs::remove(dir / "generation_config.json");
  const auto model = LoadedModel::load(dir);
  const Transformer& t = model->transformer();
  const std::vector<int> source{3, 4, 5, 6, 0};
  DecodingOptions options;
  options.max_length = 6;
  const std::vector<int> free = decode(t, source, options).front().ids;
  ASSERT_GE(free.size(), 2u);
  // A one-id sequence is banned everywhere; a longer one only after the ids before it.
  options.bad_words_ids = {{free[0]}};
  EXPECT_NE(decode(t, source, options).front().ids.front(), free[0]);
  options.bad_words_ids = {{free[0], free[1]}};
  const std::vector<int> banned_second = decode(t, source, options).front().ids;
  EXPECT_EQ(banned_second[0], free[0]);
  EXPECT_NE(banned_second[1], free[1]);
  // A forced first token keeps its own log-probability.
  options.bad_words_ids.clear();
  const int forced = free[0] == 9 ? 10 : 9;
  options.forced_bos_token_id = forced;
  const Hypothesis h = decode(t, source, options).front();
  EXPECT_EQ(h.ids.front(), forced);
  // Within float32 rounding: the search and the scorer batch their rows differently.
  EXPECT_NEAR(h.token_logprobs.front(), score_target(t, source, std::vector<int>{forced}).front(), 1e-5);
  options.forced_bos_token_id = -1;
  options.bad_words_ids = {{30}};
  EXPECT_THROW(decode(t, source, options), OptionError);
  fs::remove_all(dir);
}

TEST(Marian, ThePadTokenIsNeverGeneratedAsGenerationConfigBansIt) {
  // final_logits_bias makes pad (29) the likeliest token everywhere.
  const fs::path dir = random_marian([](std::vector<NamedTensor>& tensors) {
    for (NamedTensor& t : tensors)
      if (t.name == "final_logits_bias") t.values[29] = 50.0f;
  });
  const auto model = LoadedModel::load(dir);
  const std::vector<int> source{3, 4, 5, 0};
  DecodingOptions plain;
  plain.max_length = 4;
  EXPECT_EQ(decode(model->transformer(), source, plain).front().ids.front(), 29);
  for (const Hypothesis& h : decode(model->transformer(), source, model->generation().decoding))
    EXPECT_EQ(std::count(h.ids.begin(), h.ids.end(), 29), 0);
  // The command line applies the defaults under its flags: --beam 2 wins over num_beams 4.
  const std::string model_flag = "--model " + testing_support::shell_quote(dir.string());
  const auto result = testing_support::run_ordo("translate " + model_flag + " --source-ids '3 4 5 0' --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(json::parse(result.out).at("target_ids").dump().find("29"), std::string::npos) << result.out;
  const auto beams = testing_support::run_ordo("translate " + model_flag + " --source-ids '3 4 5 0' --beam 2 --n-best 2");
  EXPECT_EQ(beams.exit_code, 0) << beams.err;
  EXPECT_EQ(std::count(beams.out.begin(), beams.out.end(), '\n'), 2) << beams.out;
  const auto inspect = testing_support::run_ordo("inspect " + model_flag);
  EXPECT_THAT(inspect.out, HasSubstr("generation defaults ("));
  EXPECT_THAT(inspect.out, HasSubstr("bad_words_ids"));
  fs::remove_all(dir);
}

// The public library merges the checkpoint's defaults with the fields a program chose
// (Model::with_generation_defaults), for the command line and the Python bindings
// alike: the result is the one of the same options written out by hand, and a chosen
// field wins. Oracle: the explicit options (the search itself is tested against the
// PyTorch oracle elsewhere).
TEST(Marian, TheLibraryAppliesTheGenerationDefaultsUnderTheFieldsAProgramChose) {
  // pad (29) is the likeliest token everywhere unless bad_words_ids bans it.
  const fs::path dir = random_marian([](std::vector<NamedTensor>& tensors) {
    for (NamedTensor& t : tensors)
      if (t.name == "final_logits_bias") t.values[29] = 50.0f;
  });
  write_generation_config(dir, json::parse(R"({"num_beams": 3, "max_length": 6, "length_penalty": 0.5,
      "no_repeat_ngram_size": 2, "bad_words_ids": [[29]]})"));
  const Model model = Model::load(dir);
  DecodingOptions explicit_options;
  explicit_options.beam_size = 3;
  explicit_options.max_length = 5;  // transformers' max_length counts decoder_start
  explicit_options.length_penalty = 0.5;
  explicit_options.no_repeat_ngram_size = 2;
  explicit_options.bad_words_ids = {{29}};

  const DecodingOptions merged = model.with_generation_defaults({}, {});
  EXPECT_EQ(merged.beam_size, 3);
  EXPECT_EQ(merged.max_length, 5);
  EXPECT_DOUBLE_EQ(merged.length_penalty, 0.5);
  EXPECT_EQ(merged.no_repeat_ngram_size, 2);
  EXPECT_EQ(merged.bad_words_ids, explicit_options.bad_words_ids);
  EXPECT_EQ(merged.forced_bos_token_id, -1);
  // The checkpoint's max_length is a ceiling a prompt may shorten, in the defaults as
  // Model::generation_defaults() gives them and once merged; a chosen one is held to.
  EXPECT_TRUE(model.generation_defaults().max_length_is_ceiling);
  EXPECT_TRUE(merged.max_length_is_ceiling);
  EXPECT_FALSE(model.with_generation_defaults(merged, {.max_length = true}).max_length_is_ceiling);

  const std::vector<std::vector<int>> sources{{3, 4, 5, 0}, {6, 7, 8, 9, 0}};
  const auto translate = [&](const DecodingOptions& decoding) {
    TranslatorOptions options;
    options.decoding = decoding;
    options.decoding.n_best = std::min(2, decoding.beam_size);
    return Translator(model, options).translate_ids_batch(sources);
  };
  const std::vector<Translation> by_default = translate(merged), by_hand = translate(explicit_options);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    SCOPED_TRACE("source " + std::to_string(i));
    ASSERT_TRUE(by_default[i].ok()) << by_default[i].error;
    ASSERT_EQ(by_default[i].hypotheses.size(), by_hand[i].hypotheses.size());
    for (std::size_t k = 0; k < by_hand[i].hypotheses.size(); ++k) {
      EXPECT_EQ(by_default[i].hypotheses[k].ids, by_hand[i].hypotheses[k].ids);
      EXPECT_EQ(by_default[i].hypotheses[k].score, by_hand[i].hypotheses[k].score);
      EXPECT_EQ(std::count(by_default[i].hypotheses[k].ids.begin(), by_default[i].hypotheses[k].ids.end(), 29), 0);
      EXPECT_LE(by_default[i].hypotheses[k].ids.size(), 5u);
    }
  }
  // Without the defaults pad comes first: they did change the result.
  EXPECT_EQ(translate(DecodingOptions{}).front().best().ids.front(), 29);

  // A chosen field keeps the program's value, even one equal to DecodingOptions' own
  // default (greedy search); the others still come from the checkpoint.
  DecodingOptions greedy;
  greedy.beam_size = 1;
  greedy.max_length = 9;
  DecodingChoices chosen;
  chosen.beam_size = true;
  const DecodingOptions mixed = model.with_generation_defaults(greedy, chosen);
  EXPECT_EQ(mixed.beam_size, 1);
  EXPECT_EQ(mixed.max_length, 5);  // not chosen: the checkpoint's
  EXPECT_EQ(mixed.bad_words_ids, explicit_options.bad_words_ids);
  chosen.bad_words_ids = true;
  EXPECT_TRUE(model.with_generation_defaults(greedy, chosen).bad_words_ids.empty());
  // Sampling draws one hypothesis: num_beams does not apply to it.
  DecodingOptions sampled;
  sampled.sample = true;
  EXPECT_EQ(model.with_generation_defaults(sampled, {}).beam_size, 1);

  // The command line decodes with the same merge: no flag, the defaults; --beam 1, the
  // program's greedy search under the checkpoint's other defaults.
  const std::string model_flag = "--model " + testing_support::shell_quote(dir.string());
  const auto cli = testing_support::run_ordo("translate " + model_flag + " --source-ids '3 4 5 0' --json");
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_EQ(json::parse(cli.out).at("target_ids").get<std::vector<int>>(), by_hand.front().best().ids);
  const auto cli_greedy = testing_support::run_ordo("translate " + model_flag + " --source-ids '3 4 5 0' --json --beam 1");
  ASSERT_EQ(cli_greedy.exit_code, 0) << cli_greedy.err;
  TranslatorOptions greedy_options;
  greedy_options.decoding = model.with_generation_defaults(DecodingOptions{}, chosen);
  greedy_options.decoding.bad_words_ids = explicit_options.bad_words_ids;
  EXPECT_EQ(json::parse(cli_greedy.out).at("target_ids").get<std::vector<int>>(),
            Translator(model, greedy_options).translate_ids_batch(sources).front().best().ids);
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------
// Parity with the oracle.

std::vector<std::string> marian_models() {
  return read_json(parity_dir() / "index.json").at("marian_models").get<std::vector<std::string>>();
}

TEST(MarianParity, OracleCoversTheVariants) {
  std::set<std::string> kinds;
  for (const std::string& name : marian_models()) {
    const auto model = LoadedModel::load(parity_dir() / name);
    const ModelConfig& c = model->config();
    const json reference = read_json(parity_dir() / name / "reference.json");
    EXPECT_EQ(c.family, Family::Marian);
    kinds.insert(c.share_encoder_decoder_embeddings ? "shared" : "separate");
    kinds.insert(c.tie_word_embeddings ? "tied" : "untied");
    kinds.insert(reference.at("positions_in_file").get<bool>() ? "positions in file" : "positions computed");
    kinds.insert(reference.at("separate_vocabs").get<bool>() ? "target_vocab.json" : "one vocab.json");
    kinds.insert(model->weights().files().size() > 1 ? "sharded" : "single file");
    kinds.insert(reference.at("dtype").get<std::string>());
    kinds.insert(std::string("activation ") + std::string(c.to_json().at("activation_function")));
  }
  for (const char* want : {"shared", "separate", "tied", "untied", "positions in file", "positions computed",
                           "target_vocab.json", "one vocab.json", "sharded", "single file", "F32", "F16", "BF16",
                           "activation swish", "activation gelu", "activation relu", "activation gelu_new"})
    EXPECT_TRUE(kinds.contains(want)) << "no Marian oracle model covers " << want;
}

TEST(MarianParity, EveryModelScoresAndTranslatesAsPyTorch) {
  double worst = 0;
  for (const std::string& name : marian_models()) {
    SCOPED_TRACE("model " + name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const Transformer& t = model->transformer();
    const json reference = read_json(parity_dir() / name / "reference.json");
    for (const json& c : reference.at("cases")) {
      const auto source = c.at("source_ids").get<std::vector<int>>();
      const auto target = c.at("target_ids").get<std::vector<int>>();
      SCOPED_TRACE("source " + c.at("source_ids").dump());
      const auto want = c.at("token_logprobs").get<std::vector<double>>();
      const std::vector<float> got = score_target(t, source, target);
      reference::expect_close(got, want, 1e-4, 0.0);
      for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
      const auto rows = c.at("encoder_output").get<std::vector<std::vector<double>>>();
      const Matrix encoded = encode(t, source);
      ASSERT_EQ(static_cast<std::size_t>(encoded.rows()), rows.size());
      for (std::size_t r = 0; r < rows.size(); ++r)
        reference::expect_close(encoded.row(static_cast<Index>(r)), rows[r], 1e-4, 0.0);
      EXPECT_EQ(testing_support::greedy(t, source, c.at("greedy_max_length").get<Index>()).ids,
                c.at("greedy_ids").get<std::vector<int>>());
    }
    const json batch = reference.at("batch");
    const auto sources = batch.at("sources").get<std::vector<std::vector<int>>>();
    const std::vector<Score> scored = score_batch(t, sources, batch.at("targets").get<std::vector<std::vector<int>>>());
    DecodingOptions greedy;
    greedy.max_length = batch.at("greedy_max_length").get<Index>();
    const std::vector<DecodeResult> decoded = decode_batch(t, sources, greedy);
    const auto want_logprobs = batch.at("token_logprobs").get<std::vector<std::vector<double>>>();
    const auto want_ids = batch.at("greedy_ids").get<std::vector<std::vector<int>>>();
    for (std::size_t i = 0; i < sources.size(); ++i) {
      SCOPED_TRACE("batch entry " + std::to_string(i));
      ASSERT_TRUE(scored[i].ok()) << scored[i].error;
      reference::expect_close(scored[i].token_logprobs, want_logprobs[i], 1e-4, 0.0);
      ASSERT_TRUE(decoded[i].ok()) << decoded[i].error;
      EXPECT_EQ(decoded[i].hypotheses.front().ids, want_ids[i]);
    }
    for (const json& c : reference.at("beam")) {
      SCOPED_TRACE("beam case " + c.dump().substr(0, 120));
      testing_support::expect_oracle_hypotheses(
          decode(t, c.at("source_ids").get<std::vector<int>>(), testing_support::beam_case_options(c)),
          c.at("hypotheses"));
    }
  }
  std::cout << "[ parity ] Marian: worst |log-prob error| " << worst << '\n';
}

TEST(MarianParity, TokenizationIsMarianTokenizers) {
  for (const std::string& name : marian_models()) {
    SCOPED_TRACE("model " + name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const json reference = read_json(parity_dir() / name / "reference.json");
    ASSERT_FALSE(reference.at("tokenization").empty());
    for (const json& c : reference.at("tokenization")) {
      const std::string text = c.at("text");
      SCOPED_TRACE(c.at("as").get<std::string>() + " " + text);
      const auto want = c.at("ids").get<std::vector<int>>();
      const bool source = c.at("as") == "source";
      EXPECT_EQ(source ? model->tokenize_source(text) : model->tokenize_target(text), want);
    }
    // Ids become text again through the same vocabulary (eos skipped).
    const std::string plain = "the clever young teachers chase dogs";
    EXPECT_EQ(model->detokenize_source(model->tokenize_source(plain)), plain);
    EXPECT_EQ(model->detokenize_target(model->tokenize_target("Die Katze jagt den Hund")), "Die Katze jagt den Hund");
    // A language token is one piece of the vocabulary, shown as it is.
    const auto ids = model->tokenize_source(">>deu<< dogs");
    EXPECT_EQ(model->source_pieces(ids).front(), ">>deu<<");
  }
}

// ---------------------------------------------------------------------------------------
// Broken tokenizer files: one line naming the file, exit 1.

// A copy of the first oracle model with one file changed.
fs::path broken_copy(const std::function<void(const fs::path&)>& change) {
  const fs::path dir = temp_dir("marian-files");
  fs::copy(parity_dir() / marian_models().front(), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  change(dir);
  return dir;
}

json read_vocab(const fs::path& dir) {
  std::ifstream in(dir / "vocab.json");
  return json::parse(in);
}

void write_vocab(const fs::path& dir, const json& vocab) { std::ofstream(dir / "vocab.json") << vocab.dump(); }

std::string load_error(const fs::path& dir) {
  const std::string message = error_of([&] { LoadedModel::load(dir); });
  fs::remove_all(dir);
  return message;
}

TEST(MarianFiles, AVocabularyThatDisagreesIsRefusedByName) {
  // A piece of source.spm the vocabulary lacks: the files are of two models.
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) {
                json vocab = read_vocab(dir);
                vocab.erase("▁chase");
                write_vocab(dir, vocab);
              })),
              HasSubstr("vocab.json: lacks the piece '▁chase' (id "));
  // An id beyond the embedding's rows.
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) {
                json vocab = read_vocab(dir);
                vocab["<pad>"] = 5000;
                write_vocab(dir, vocab);
              })),
              HasSubstr("vocab.json: has the id 5000, beyond the embedding's vocab_size="));
  // Special pieces that are not config.json's tokens.
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) {
                json vocab = read_vocab(dir);
                std::swap(vocab["</s>"], vocab["<unk>"]);
                write_vocab(dir, vocab);
              })),
              HasSubstr("vocab.json: gives '</s>' the id 1, but config.json's eos_token_id is 0"));
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) {
                json vocab = read_vocab(dir);
                vocab["▁chase"] = vocab["▁dog"];
                write_vocab(dir, vocab);
              })),
              HasSubstr("have the same id"));
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) {
                json vocab = read_vocab(dir);
                vocab.erase("<unk>");
                write_vocab(dir, vocab);
              })),
              HasSubstr("vocab.json: has no '<unk>' piece, which unknown pieces become"));
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) { std::ofstream(dir / "vocab.json") << "[1, 2]"; })),
              HasSubstr("vocab.json: expected a JSON object {piece: id}"));
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) {
                json vocab = read_vocab(dir);
                vocab["▁chase"] = "7";
                write_vocab(dir, vocab);
              })),
              HasSubstr("piece '▁chase' has the id \"7\", not an integer"));
}

TEST(MarianFiles, MissingOrBrokenTokenizerFilesAreRefusedByName) {
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) { fs::remove(dir / "target.spm"); })),
              HasSubstr("target.spm: is missing, and a Marian tokenizer needs it"));
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) { std::ofstream(dir / "source.spm") << "not a model"; })),
              HasSubstr("source.spm: is not a SentencePiece model"));
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) {
                std::ofstream(dir / "tokenizer_config.json") << R"({"separate_vocabs": "yes"})";
              })),
              HasSubstr("tokenizer_config.json: key 'separate_vocabs': expected true or false"));
  // Without any tokenizer file, ids still work and text says what is missing.
  const fs::path dir = broken_copy([](const fs::path& d) {
    for (const char* file : {"source.spm", "target.spm", "vocab.json"}) fs::remove(d / file);
  });
  const auto model = LoadedModel::load(dir);
  EXPECT_THAT(error_of([&] { model->tokenize_source("dogs"); }),
              HasSubstr("has no tokenizer (source.spm, target.spm and vocab.json)"));
  fs::remove_all(dir);
}

TEST(MarianFiles, TheCommandLineSaysItInOneLineAndExits1) {
  const fs::path dir = broken_copy([](const fs::path& d) {
    json vocab = read_vocab(d);
    vocab["</s>"] = 3;
    write_vocab(d, vocab);
  });
  const auto result = testing_support::run_ordo("translate --model " + testing_support::shell_quote(dir.string()) + " dogs");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_THAT(result.err, HasSubstr("vocab.json: "));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ordo
