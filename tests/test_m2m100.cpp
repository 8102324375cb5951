// The m2m_100 family (Hugging Face's M2M100ForConditionalGeneration: M2M100 and NLLB-200)
// with NLLB's tokenizer files: its config.json (models/m2m100_config.h), its tensor table,
// its positions counted from the non-pad tokens, its tokenizer description
// (models/nllb_tokenizer.h), the language codes of the API and the command line, and
// every way they can be wrong, each one line naming the file, the key or the flag.
//
// M2M100Parity.* compares the oracle's NLLB-layout models (tools/oracle/make_parity_models.py,
// "m2m100_models" of its index; tools/oracle/ordo_torch/m2m100.py is written from
// transformers' modeling_m2m_100.py, m2m100_dirs.py from tokenization_nllb.py) with the
// tolerances of test_marian.cpp: log-probs and encoder outputs within 1e-4 absolute
// (float32 against the oracle's float64), greedy and beam ids identical (cases kept only
// with margins >= 1e-2 and 1e-3), beam scores within 1e-4. Token ids must be identical to
// the SentencePiece Python module's pieces with fairseq's offset and NllbTokenizer's codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/decode_inputs.h"
#include "engine/error.h"
#include "engine/positions.h"
#include "engine/score.h"
#include "engine/search.h"
#include "models/api/internal.h"
#include "models/loaded_model.h"
#include "models/tensor_names.h"
#include "ordo/ordo.hpp"
#include "tests/cli_runner.h"
#include "tests/greedy.h"
#include "tests/model_factory.h"
#include "tests/parity_support.h"
#include "tests/reference.h"
#include "tests/search_support.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HasSubstr;
using testing::Not;
using testing_support::parity_dir;
using testing_support::temp_dir;
const auto& read_json = testing_support::read_oracle_json;

// NLLB-200's config.json as published (facebook/nllb-200-distilled-600M), made small.
json nllb_config() {
  return json::parse(R"({
    "_name_or_path": "facebook/nllb-200-distilled-600M", "activation_dropout": 0.0,
    "activation_function": "relu", "architectures": ["M2M100ForConditionalGeneration"],
    "attention_dropout": 0.1, "bos_token_id": 0, "d_model": 16, "decoder_attention_heads": 4,
    "decoder_ffn_dim": 24, "decoder_layerdrop": 0, "decoder_layers": 2, "decoder_start_token_id": 2,
    "dropout": 0.1, "encoder_attention_heads": 2, "encoder_ffn_dim": 32, "encoder_layerdrop": 0,
    "encoder_layers": 2, "eos_token_id": 2, "init_std": 0.02, "is_encoder_decoder": true, "max_length": 200,
    "max_position_embeddings": 20, "model_type": "m2m_100", "num_hidden_layers": 2, "pad_token_id": 1,
    "scale_embedding": true, "tokenizer_class": "NllbTokenizer", "torch_dtype": "float32",
    "transformers_version": "4.21.0.dev0", "use_cache": true, "vocab_size": 30})");
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
  for (const TensorSpec& spec : expected_tensors(config)) {
    EXPECT_TRUE(spec.required) << spec.name;  // the family has no optional tensor
    names.insert(spec.name);
  }
  return names;
}

// ---------------------------------------------------------------------------------------
// config.json, the tensor table and the positions.

TEST(M2M100, ConfigAsSavePretrainedWritesItMapsOntoTheEngine) {
  const ModelConfig c = ModelConfig::from_json(nllb_config(), "config.json");
  EXPECT_EQ(c.family, Family::M2M100);
  EXPECT_EQ(c.vocab_size, 30);
  EXPECT_EQ(c.decoder_vocab_size, 30);
  EXPECT_EQ(c.d_model, 16);
  EXPECT_EQ(c.encoder_attention_heads, 2);
  EXPECT_EQ(c.decoder_attention_heads, 4);
  EXPECT_EQ(c.activation_function, Activation::Relu);
  EXPECT_TRUE(c.normalize_before);
  EXPECT_FALSE(c.layernorm_embedding);
  EXPECT_TRUE(c.scale_embedding);
  EXPECT_EQ(c.position_encoding, PositionEncoding::Sinusoidal);
  EXPECT_EQ(c.sinusoidal_layout, SinusoidalLayout::Split);
  EXPECT_EQ(c.sinusoidal_frequencies, SinusoidalFrequencies::Tensor2Tensor);
  EXPECT_EQ(c.position_offset, 2);  // padding_idx + 1
  EXPECT_TRUE(c.positions_skip_pad);
  EXPECT_FALSE(c.positions_bounded);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-5);
  EXPECT_EQ(c.pad_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.decoder_start_token_id, 2);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_TRUE(c.share_encoder_decoder_embeddings);
  EXPECT_TRUE(c.tie_word_embeddings);

  // Absent keys take M2M100Config's defaults (configuration_m2m_100.py).
  const ModelConfig d = ModelConfig::from_json({{"model_type", "m2m_100"}}, "config.json");
  EXPECT_EQ(d.vocab_size, 128112);
  EXPECT_EQ(d.d_model, 1024);
  EXPECT_EQ(d.encoder_layers, 12);
  EXPECT_EQ(d.decoder_attention_heads, 16);
  EXPECT_EQ(d.decoder_ffn_dim, 4096);
  EXPECT_EQ(d.max_position_embeddings, 1024);
  EXPECT_EQ(d.activation_function, Activation::Relu);
  EXPECT_TRUE(d.scale_embedding);
  EXPECT_EQ(d.pad_token_id, 1);
  EXPECT_EQ(d.decoder_start_token_id, 2);
  EXPECT_EQ(d.eos_token_id, 2);
  EXPECT_EQ(ModelConfig::from_json(with(nllb_config(), {{"activation_function", "gelu_new"}}), "c").activation_function,
            Activation::GeluTanh);

  // inspect shows the family's own keys, and they read back to the same config.
  const json shown = c.to_json();
  for (const char* internal : {"position_encoding", "sinusoidal_layout", "normalize_before", "norm", "position_offset"})
    EXPECT_FALSE(shown.contains(internal)) << internal;
  EXPECT_EQ(shown.at("model_type"), "m2m_100");
  EXPECT_EQ(shown.at("activation_function"), "relu");
  const ModelConfig again = ModelConfig::from_json(shown, "shown");
  EXPECT_EQ(again.to_json(), shown);
}

TEST(M2M100, TableIsSavePretrainedsLayout) {
  const ModelConfig c =
      ModelConfig::from_json(with(nllb_config(), {{"decoder_layers", 1}, {"encoder_layers", 1}}), "c");
  const auto names = names_of(c);
  for (const char* present : {"model.shared.weight", "model.encoder.layer_norm.weight", "model.encoder.layer_norm.bias",
                              "model.decoder.layer_norm.weight", "model.decoder.layer_norm.bias",
                              "model.encoder.layers.0.self_attn.q_proj.weight", "model.encoder.layers.0.fc1.bias",
                              "model.decoder.layers.0.encoder_attn.out_proj.bias",
                              "model.decoder.layers.0.encoder_attn_layer_norm.weight",
                              "model.decoder.layers.0.final_layer_norm.bias"})
    EXPECT_TRUE(names.contains(present)) << present;
  // Tied duplicates, the unsaved sinusoid buffer, and what M2M100 does not have.
  for (const char* absent : {"lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                             "model.encoder.embed_positions.weights", "model.encoder.embed_positions.weight",
                             "final_logits_bias", "model.encoder.layernorm_embedding.weight"})
    EXPECT_FALSE(names.contains(absent)) << absent;
  EXPECT_EQ(names.size(), 1u + 4 + 16 + 26);  // shared, final norms, an encoder layer, a decoder layer
}

TEST(M2M100, BadConfigsAreOneLineNamingTheKey) {
  EXPECT_THAT(config_error(with(nllb_config(), {{"d_model", "16"}})),
              HasSubstr("dir/config.json: key 'd_model': expected an integer, got a string (\"16\")"));
  EXPECT_THAT(config_error(with(nllb_config(), {{"scale_embedding", 1}})),
              HasSubstr("key 'scale_embedding': expected true or false"));
  EXPECT_THAT(config_error(with(nllb_config(), {{"dropout", "0.1"}})), HasSubstr("key 'dropout': expected a number"));
  EXPECT_THAT(config_error(with(nllb_config(), {{"tokenizer_class", 3}})),
              HasSubstr("key 'tokenizer_class': expected a string"));
  EXPECT_THAT(config_error(with(nllb_config(), {{"activation_function", "quick_gelu"}})),
              HasSubstr("key 'activation_function': unknown value \"quick_gelu\" (expected one of: relu, gelu, swish, "
                        "silu, gelu_new, gelu_pytorch_tanh)"));
  EXPECT_THAT(config_error(with(nllb_config(), {{"tie_word_embeddings", false}})),
              HasSubstr("key 'tie_word_embeddings': is false, and ordo reads M2M100 checkpoints with tied embeddings"));
  EXPECT_THAT(config_error(with(nllb_config(), {{"is_encoder_decoder", false}})),
              HasSubstr("key 'is_encoder_decoder': is false"));
  EXPECT_THAT(config_error(with(nllb_config(), {{"encoder_attention_heads", 3}})),
              HasSubstr("key 'encoder_attention_heads': d_model=16 is not divisible by encoder_attention_heads=3"));
  for (const int odd_or_tiny : {9, 2})
    EXPECT_THAT(config_error(with(nllb_config(), {{"d_model", odd_or_tiny}, {"encoder_attention_heads", 1},
                                                  {"decoder_attention_heads", 1}})),
                HasSubstr("key 'd_model': M2M100's sinusoidal positions need an even d_model of at least 4, got " +
                          std::to_string(odd_or_tiny)));
  EXPECT_THAT(config_error(with(nllb_config(), {{"pad_token_id", 30}})),
              HasSubstr("key 'pad_token_id': token id 30 is outside [0, vocab_size=30)"));
  EXPECT_THAT(config_error(with(nllb_config(), {{"vocab_size", 0}})), HasSubstr("key 'vocab_size': must be > 0"));
  // One line each.
  EXPECT_EQ(config_error(with(nllb_config(), {{"d_model", "16"}})).find('\n'), std::string::npos);
}

// M2M100SinusoidalPositionalEmbedding: tensor2tensor frequencies, sin half then cos half,
// row padding_idx + (non-pad tokens up to here); a pad token gets nothing.
double m2m100_sinusoid(Index position, Index j, Index dim) {
  const Index half = dim / 2;
  const Index i = j % half;
  const double angle = static_cast<double>(position) * std::exp(-static_cast<double>(i) * std::log(10000.0) /
                                                                static_cast<double>(half - 1));
  return j < half ? std::sin(angle) : std::cos(angle);
}

TEST(M2M100, PositionsCountOnlyTheNonPadTokens) {
  const Index dim = 8;
  const int pad = 1;
  const SinusoidalPositions positions(dim, SinusoidalLayout::Split, SinusoidalFrequencies::Tensor2Tensor, pad + 1,
                                      std::numeric_limits<Index>::max(), pad);
  // Two sequences of 5 rows: the first holds pads among its tokens, the second is two
  // steps into a decode (first step 2) with 3 real rows and 2 rows of batch padding.
  const std::vector<int> ids{7, pad, 8, pad, 9, 5, pad, 6, 0, 0};
  const std::vector<Index> first_steps{0, 2}, lengths{5, 3};
  const BatchRows rows{5, first_steps, lengths};
  Matrix embeddings(10, dim);
  embeddings.fill(0.0f);
  positions.add(embeddings.view(), rows, ids);
  // Row -> the position it must carry (-1: nothing). padding_idx + 1 + non-pad tokens before.
  const std::vector<Index> want{2, -1, 3, -1, 4, 4, -1, 5, -1, -1};
  for (Index r = 0; r < 10; ++r)
    for (Index j = 0; j < dim; ++j) {
      const double expected = want[static_cast<std::size_t>(r)] < 0 ? 0.0 : m2m100_sinusoid(want[static_cast<std::size_t>(r)], j, dim);
      EXPECT_NEAR(embeddings.row(r)[static_cast<std::size_t>(j)], expected, 1e-6) << "row " << r << " column " << j;
    }
  // Without ids (a position table), every row counts: steps from the offset.
  Matrix plain(5, dim);
  plain.fill(0.0f);
  positions.add(plain.view(), Index{0});
  for (Index r = 0; r < 5; ++r) EXPECT_NEAR(plain.row(r)[1], m2m100_sinusoid(r + 2, 1, dim), 1e-6);
  EXPECT_THROW(positions.add(embeddings.view(), rows, std::vector<int>(3, 7)), Error);
}

TEST(M2M100, ALongListOfCodesIsAbbreviatedInMessages) {
  LanguageCodes languages;
  for (int i = 0; i < 202; ++i) {
    languages.codes.push_back(std::string(1, 'c').append(std::to_string(i)));  // not "c" + ...: g++ 12's bogus -Wrestrict
    languages.ids.push_back(1000 + i);
  }
  EXPECT_EQ(languages.listed(), "c0, c1, c2, c3, c4, c5, c6, c7, ..., c200, c201 (202 codes; ordo inspect lists them all)");
  languages.codes.resize(3);
  languages.ids.resize(3);
  EXPECT_EQ(languages.listed(), "c0, c1, c2");
  EXPECT_EQ(languages.id("c1"), 1001);
  EXPECT_FALSE(languages.id("c9").has_value());
  EXPECT_TRUE(languages.is_code(1002));
  EXPECT_FALSE(languages.is_code(3));
}

// ---------------------------------------------------------------------------------------
// Parity with the oracle.

std::vector<std::string> m2m100_models() {
  return read_json(parity_dir() / "index.json").at("m2m100_models").get<std::vector<std::string>>();
}

TEST(M2M100Parity, OracleCoversTheVariants) {
  std::set<std::string> kinds;
  for (const std::string& name : m2m100_models()) {
    const auto model = LoadedModel::load(parity_dir() / name);
    const ModelConfig& c = model->config();
    const json reference = read_json(parity_dir() / name / "reference.json");
    EXPECT_EQ(c.family, Family::M2M100);
    kinds.insert(reference.at("added_tokens_decoder").get<bool>() ? "ids in added_tokens_decoder" : "ids after pieces");
    kinds.insert(reference.at("legacy_behaviour").get<bool>() ? "legacy" : "code first");
    kinds.insert(c.scale_embedding ? "scaled" : "unscaled");
    kinds.insert(model->weights().files().size() > 1 ? "sharded" : "single file");
    kinds.insert(reference.at("dtype").get<std::string>());
    kinds.insert(std::string("activation ") + std::string(c.to_json().at("activation_function")));
    EXPECT_GT(c.vocab_size, model->tokenizer_vocab_size()) << "the embedding has spare rows, as NLLB-200's";
    EXPECT_EQ(model->languages().codes.size(), reference.at("codes").size());
  }
  for (const char* want : {"ids in added_tokens_decoder", "ids after pieces", "legacy", "code first", "scaled",
                           "unscaled", "sharded", "single file", "F32", "F16", "BF16", "activation relu",
                           "activation gelu", "activation swish"})
    EXPECT_TRUE(kinds.contains(want)) << "no M2M100 oracle model covers " << want;
}

TEST(M2M100Parity, EveryModelScoresAndTranslatesAsPyTorch) {
  double worst = 0;
  for (const std::string& name : m2m100_models()) {
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
      for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i)
        worst = std::max(worst, std::abs(got[i] - want[i]));
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
  std::cout << "[ parity ] M2M100: worst |log-prob error| " << worst << '\n';
}

// Sources that hold the pad id among their tokens: the encoder's positions skip them, one
// at a time and in a padded batch beside other lengths (M2M100's non-pad positions).
TEST(M2M100Parity, PadTokensInsideASourceTakeNoPosition) {
  for (const std::string& name : m2m100_models()) {
    SCOPED_TRACE("model " + name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const Transformer& t = model->transformer();
    const json pad = read_json(parity_dir() / name / "reference.json").at("pad_inside");
    const auto sources = pad.at("sources").get<std::vector<std::vector<int>>>();
    const auto targets = pad.at("targets").get<std::vector<std::vector<int>>>();
    ASSERT_FALSE(sources.empty());
    for (std::size_t i = 0; i < sources.size(); ++i) {
      SCOPED_TRACE("source " + json(sources[i]).dump());
      EXPECT_NE(std::count(sources[i].begin(), sources[i].end(), 1), 0);
      reference::expect_close(score_target(t, sources[i], targets[i]),
                              pad.at("token_logprobs")[i].get<std::vector<double>>(), 1e-4, 0.0);
      const auto rows = pad.at("encoder_output")[i].get<std::vector<std::vector<double>>>();
      const Matrix encoded = encode(t, sources[i]);
      for (std::size_t r = 0; r < rows.size(); ++r)
        reference::expect_close(encoded.row(static_cast<Index>(r)), rows[r], 1e-4, 0.0);
    }
    const auto batch_sources = pad.at("batch_sources").get<std::vector<std::vector<int>>>();
    const std::vector<Score> scored =
        score_batch(t, batch_sources, pad.at("batch_targets").get<std::vector<std::vector<int>>>());
    for (std::size_t i = 0; i < batch_sources.size(); ++i) {
      ASSERT_TRUE(scored[i].ok()) << scored[i].error;
      reference::expect_close(scored[i].token_logprobs, pad.at("batch_token_logprobs")[i].get<std::vector<double>>(),
                              1e-4, 0.0);
    }
  }
}

// Text in, text out through the public API, as transformers' pipeline runs NLLB: the
// source tokenized with its language code, greedy from </s> with the target code forced.
TEST(M2M100Parity, TranslatorTranslatesBetweenTheGivenLanguages) {
  for (const std::string& name : m2m100_models()) {
    SCOPED_TRACE("model " + name);
    const Model model = Model::load(parity_dir() / name);
    const json reference = read_json(parity_dir() / name / "reference.json");
    ASSERT_FALSE(reference.at("translations").empty());
    for (const json& c : reference.at("translations")) {
      SCOPED_TRACE(c.dump());
      TranslatorOptions options;
      options.source_lang = c.at("source_lang");
      options.target_lang = c.at("target_lang");
      options.decoding.max_length = static_cast<int>(c.at("ids").size());
      const Translator translator(model, options);
      const Translation t = translator.translate_detailed(c.at("text").get<std::string>());
      EXPECT_EQ(t.source_ids, c.at("source_ids").get<std::vector<int>>());
      EXPECT_EQ(t.best().ids, c.at("ids").get<std::vector<int>>());
      EXPECT_EQ(t.best().ids.front(), reference.at("codes").at(options.target_lang).get<int>());
      // The code has no text: the translation is the pieces after it.
      EXPECT_EQ(t.best().text, model.detokenize_target(std::vector<int>(t.best().ids.begin() + 1, t.best().ids.end())));
    }
  }
}

TEST(M2M100Parity, TokenizationIsNllbTokenizers) {
  for (const std::string& name : m2m100_models()) {
    SCOPED_TRACE("model " + name);
    const Model model = Model::load(parity_dir() / name);
    const json reference = read_json(parity_dir() / name / "reference.json");
    ASSERT_FALSE(reference.at("tokenization").empty());
    for (const json& c : reference.at("tokenization")) {
      const std::string text = c.at("text");
      SCOPED_TRACE(c.at("as").get<std::string>() + " " + text);
      const auto want = c.at("ids").get<std::vector<int>>();
      const std::string lang = c.at("lang");
      EXPECT_EQ(c.at("as") == "source" ? model.tokenize_source(text, lang) : model.tokenize_target(text, lang), want);
    }
    // Ids become text again, without the code and eos; the code is a piece of its own.
    const std::string plain = "the clever young teachers chase dogs";
    const std::vector<int> ids = model.tokenize_source(plain, "eng_Latn");
    EXPECT_EQ(model.detokenize_source(ids), plain);
    const std::vector<std::string> pieces = model.source_pieces(ids);
    EXPECT_TRUE(pieces.front() == "eng_Latn" || pieces.back() == "eng_Latn") << pieces.front();
    // Without a code the text cannot be read as this model reads it.
    EXPECT_THAT(error_of([&] { model.tokenize_source(plain); }), HasSubstr("needs the text's language code"));
    EXPECT_THROW(model.tokenize_source(plain, "xx_Latn"), OptionError);
  }
}

TEST(M2M100Parity, LanguageCodesAreCheckedByTheTranslator) {
  const Model model = Model::load(parity_dir() / m2m100_models().front());
  // What a call finds: OptionError naming the field, before any work.
  const auto option_error = [&](const std::string& source, const std::string& target) {
    TranslatorOptions options;
    options.source_lang = source;
    options.target_lang = target;
    try {
      const Translator translator(model, options);
      (void)translator.translate_batch(std::vector<std::string>{"the dogs"});
    } catch (const OptionError& e) {
      return e.field() + ": " + e.problem();
    }
    return std::string("(no error)");
  };
  EXPECT_THAT(option_error("", "deu_Latn"), HasSubstr("source_lang: this model translates between languages"));
  EXPECT_THAT(option_error("eng_Latn", ""), HasSubstr("target_lang: this model translates between languages"));
  EXPECT_THAT(option_error("eng_Latn", "xyz_Latn"),
              HasSubstr("target_lang: unknown language code \"xyz_Latn\"; this model's codes: deu_Latn, eng_Latn, "
                        "fra_Latn, nds_Latn, spa_Latn"));
  EXPECT_EQ(option_error("eng_Latn", "deu_Latn"), "(no error)");
  // A translator without languages serves the ones derived from it (a server's).
  const Translator base(model);
  EXPECT_THROW(base.score("the dogs", "Hunde"), OptionError);
  EXPECT_THROW(base.translate_ids_batch(std::vector<std::vector<int>>{{122, 40, 2}}), OptionError);
  TranslatorOptions languages;
  languages.source_lang = "eng_Latn";
  languages.target_lang = "deu_Latn";
  languages.decoding.max_length = 3;
  EXPECT_EQ(base.with_options(languages).translate_detailed("the dogs").best().ids.front(), 121);
  languages.source_lang.clear();
  EXPECT_EQ(base.with_options(languages).translate_ids_batch(std::vector<std::vector<int>>{{122, 40, 2}})
                .front().best().ids.front(),
            121);
  // A model of one pair takes no code.
  const Model plain = Model::load_default();
  TranslatorOptions options;
  options.source_lang = "eng_Latn";
  try {
    Translator translator(plain, options);
    ADD_FAILURE() << "a language code on a model without codes was accepted";
  } catch (const OptionError& e) {
    EXPECT_EQ(e.field(), "source_lang");
    EXPECT_THAT(e.problem(), HasSubstr("this model has no language codes"));
  }
  EXPECT_TRUE(plain.language_codes().empty());
  EXPECT_EQ(model.info().language_codes.size(), 5u);
}

// A Generator continues a forced start of a translation: a multilingual model's prompt
// begins with the target's code, where the Translator forces it (transformers'
// decoder_input_ids [</s>, code, ...]), and its source is read as source_lang. Oracle:
// the Translator's greedy translations, themselves the PyTorch oracle's
// (TranslatorTranslatesBetweenTheGivenLanguages): the code and a prefix of a
// translation, teacher-forced, leave the rest of it to be generated.
TEST(M2M100Parity, GeneratorContinuesTranslationsBetweenTheGivenLanguages) {
  for (const std::string& name : m2m100_models()) {
    SCOPED_TRACE("model " + name);
    const Model model = Model::load(parity_dir() / name);
    const json reference = read_json(parity_dir() / name / "reference.json");
    for (const json& c : reference.at("translations")) {
      SCOPED_TRACE(c.dump());
      const auto ids = c.at("ids").get<std::vector<int>>();
      ASSERT_GE(ids.size(), 3u);
      GeneratorOptions options;
      options.source_lang = c.at("source_lang");
      options.target_lang = c.at("target_lang");
      options.decoding.max_length = static_cast<int>(ids.size()) - 1;  // the code is the prompt's, not generated
      options.decoding.forced_bos_token_id = 7;  // replaced by the code at the prompt's start, never forced after it
      const Generator generator(model, options);
      const int code = reference.at("codes").at(options.target_lang).get<int>();
      // No prompt: the code alone, then the whole translation.
      const Generation whole = generator.generate_detailed("", c.at("text").get<std::string>());
      EXPECT_EQ(whole.source_ids, c.at("source_ids").get<std::vector<int>>());
      EXPECT_EQ(whole.prompt_ids, std::vector<int>{code});
      EXPECT_EQ(whole.best().ids, std::vector<int>(ids.begin() + 1, ids.end()));
      EXPECT_EQ(whole.best().text, model.detokenize_target(ids));
      // The code and the first generated token as a prompt: the rest follows.
      options.decoding.max_length = static_cast<int>(ids.size()) - 2;
      const std::vector<std::vector<int>> prompts{{code, ids[1]}}, sources{c.at("source_ids").get<std::vector<int>>()};
      const Generation rest = generator.with_options(options).generate_ids_batch(prompts, sources).front();
      ASSERT_TRUE(rest.ok()) << rest.error;
      EXPECT_EQ(rest.best().ids, std::vector<int>(ids.begin() + 2, ids.end()));
      // A text prompt is the code, then its pieces, without eos: what Model::tokenize_prompt shows.
      const Generation prepared = generator.prepare("die Hunde", "the dogs");
      ASSERT_TRUE(prepared.ok()) << prepared.error;
      EXPECT_EQ(prepared.prompt_ids, model.tokenize_prompt("die Hunde", false, options.target_lang));
      std::vector<int> pieces = model.tokenize_target("die Hunde", options.target_lang);
      pieces.erase(std::remove(pieces.begin(), pieces.end(), code), pieces.end());
      pieces.pop_back();  // eos
      pieces.insert(pieces.begin(), code);
      EXPECT_EQ(prepared.prompt_ids, pieces);
    }
  }
}

TEST(M2M100Parity, LanguageCodesAreCheckedByTheGenerator) {
  const Model model = Model::load(parity_dir() / m2m100_models().front());
  const auto option_error = [&](const std::string& source, const std::string& target) {
    GeneratorOptions options;
    options.source_lang = source;
    options.target_lang = target;
    try {
      const Generator generator(model, options);
      (void)generator.generate_batch(std::vector<std::string>{""}, std::vector<std::string>{"the dogs"});
    } catch (const OptionError& e) {
      return e.field() + ": " + e.problem();
    }
    return std::string("(no error)");
  };
  EXPECT_THAT(option_error("", "deu_Latn"), HasSubstr("source_lang: this model translates between languages"));
  EXPECT_THAT(option_error("eng_Latn", ""), HasSubstr("target_lang: this model translates between languages"));
  EXPECT_THAT(option_error("xyz_Latn", "deu_Latn"), HasSubstr("source_lang: unknown language code \"xyz_Latn\""));
  EXPECT_EQ(option_error("eng_Latn", "deu_Latn"), "(no error)");
  // Ids carry their codes: a generator without them continues id prompts.
  const Generator base(model);
  EXPECT_TRUE(base.generate_ids_batch(std::vector<std::vector<int>>{{121}}, std::vector<std::vector<int>>{{122, 40, 2}})
                  .front()
                  .ok());
  EXPECT_THROW((void)base.prepare("die", "the dogs"), OptionError);
  // Models without codes take none: a translator of one pair, a language model.
  for (const char* name : {"sinusoidal", "german-llama"}) {
    GeneratorOptions options;
    options.target_lang = "deu_Latn";
    try {
      Generator generator(Model::load(name), options);
      ADD_FAILURE() << name << ": a language code on a model without codes was accepted";
    } catch (const OptionError& e) {
      EXPECT_EQ(e.field(), "target_lang");
      EXPECT_THAT(e.problem(), HasSubstr("this model has no language codes"));
    }
  }
  EXPECT_THROW((void)Model::load("sinusoidal").tokenize_prompt("Katzen", false, "deu_Latn"), OptionError);
}

// ---------------------------------------------------------------------------------------
// Broken tokenizer files: one line naming the file, exit 1.

// A copy of oracle model `index` with one file changed.
fs::path broken_copy(std::size_t index, const std::function<void(const fs::path&)>& change) {
  const fs::path dir = temp_dir("m2m100-files");
  fs::copy(parity_dir() / m2m100_models().at(index), dir,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  change(dir);
  return dir;
}

json read_file_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}
void write_file_json(const fs::path& path, const json& value) { std::ofstream(path) << value.dump(); }
void edit(const fs::path& path, const std::function<void(json&)>& change) {
  json value = read_file_json(path);
  change(value);
  write_file_json(path, value);
}

std::string load_error(const fs::path& dir) {
  const std::string message = error_of([&] { LoadedModel::load(dir); });
  fs::remove_all(dir);
  return message;
}

// Model 0 lists its codes' ids in added_tokens_decoder; model 1 has them after the pieces.
TEST(M2M100Files, ALanguageCodeListThatDisagreesIsRefusedByName) {
  // More codes than the embedding has rows for.
  EXPECT_THAT(load_error(broken_copy(1, [](const fs::path& dir) {
                edit(dir / "special_tokens_map.json", [](json& map) {
                  for (const char* code : {"ita_Latn", "nld_Latn", "pol_Latn", "por_Latn"})
                    map["additional_special_tokens"].push_back(code);
                });
              })),
              HasSubstr("the token 'por_Latn' has the id 129 (120 pieces + fairseq's offset + 9 language codes + "
                        "<mask>), beyond the embedding's vocab_size=129 rows (the language code list and config.json "
                        "belong to different models)"));
  // An id beyond the embedding in added_tokens_decoder.
  EXPECT_THAT(load_error(broken_copy(0, [](const fs::path& dir) {
                edit(dir / "tokenizer_config.json", [](json& config) {
                  config["added_tokens_decoder"]["500"] = {{"content", "xyz_Latn"}};
                });
              })),
              HasSubstr("tokenizer_config.json: key 'added_tokens_decoder': has the id \"500\", not an id of the "
                        "embedding [0, vocab_size=129)"));
  // A code listed but given no id, and one whose id is a piece's.
  EXPECT_THAT(load_error(broken_copy(0, [](const fs::path& dir) {
                edit(dir / "tokenizer_config.json", [](json& config) { config["added_tokens_decoder"].erase("121"); });
              })),
              HasSubstr("lacks the language code 'deu_Latn' that additional_special_tokens lists"));
  EXPECT_THAT(load_error(broken_copy(0, [](const fs::path& dir) {
                edit(dir / "tokenizer_config.json", [](json& config) {
                  config["added_tokens_decoder"].erase("121");
                  config["added_tokens_decoder"]["40"] = {{"content", "deu_Latn"}};
                });
              })),
              HasSubstr("the token 'deu_Latn' has the id 40, which is the SentencePiece piece"));
  // A code listed twice would have two ids (found by fuzzing); a special token is no code.
  EXPECT_THAT(load_error(broken_copy(1, [](const fs::path& dir) {
                edit(dir / "special_tokens_map.json",
                     [](json& map) { map["additional_special_tokens"].push_back(map["additional_special_tokens"][0]); });
              })),
              HasSubstr("special_tokens_map.json: key 'additional_special_tokens': lists 'deu_Latn' twice"));
  EXPECT_THAT(load_error(broken_copy(0, [](const fs::path& dir) {
                edit(dir / "tokenizer_config.json",
                     [](json& config) { config["additional_special_tokens"].push_back("</s>"); });
              })),
              HasSubstr("tokenizer_config.json: key 'additional_special_tokens': lists '</s>' as a language code, but "
                        "it is a special token"));
  // No codes at all.
  EXPECT_THAT(load_error(broken_copy(1, [](const fs::path& dir) {
                edit(dir / "special_tokens_map.json", [](json& map) { map.erase("additional_special_tokens"); });
              })),
              HasSubstr("names no language codes (additional_special_tokens in tokenizer_config.json or "
                        "special_tokens_map.json)"));
  EXPECT_THAT(load_error(broken_copy(1, [](const fs::path& dir) {
                edit(dir / "special_tokens_map.json", [](json& map) { map["additional_special_tokens"] = "eng_Latn"; });
              })),
              HasSubstr("special_tokens_map.json: key 'additional_special_tokens': expected a list of language codes"));
}

TEST(M2M100Files, TokenizersOrdoDoesNotReadAreRefusedByName) {
  EXPECT_THAT(load_error(broken_copy(0, [](const fs::path& dir) {
                edit(dir / "tokenizer_config.json", [](json& config) { config["tokenizer_class"] = "M2M100Tokenizer"; });
              })),
              HasSubstr("M2M100Tokenizer (vocab.json with sentencepiece.bpe.model, \"__en__\" language codes) is not "
                        "read yet"));
  EXPECT_THAT(load_error(broken_copy(0, [](const fs::path& dir) {
                edit(dir / "tokenizer_config.json", [](json& config) { config["tokenizer_class"] = "T5Tokenizer"; });
              })),
              HasSubstr("tokenizer_config.json: key 'tokenizer_class': \"T5Tokenizer\" is not a tokenizer ordo reads "
                        "for an m2m_100 model"));
  EXPECT_THAT(load_error(broken_copy(0, [](const fs::path& dir) { fs::remove(dir / "sentencepiece.bpe.model"); })),
              HasSubstr("sentencepiece.bpe.model: is missing, and an NLLB tokenizer needs it"));
  EXPECT_THAT(load_error(broken_copy(0, [](const fs::path& dir) {
                std::ofstream(dir / "sentencepiece.bpe.model") << "not a model";
              })),
              HasSubstr("sentencepiece.bpe.model: is not a SentencePiece model"));
  EXPECT_THAT(load_error(broken_copy(0, [](const fs::path& dir) {
                edit(dir / "tokenizer_config.json", [](json& config) { config["legacy_behaviour"] = "no"; });
              })),
              HasSubstr("tokenizer_config.json: key 'legacy_behaviour': expected true or false"));
  EXPECT_THAT(load_error(broken_copy(0, [](const fs::path& dir) {
                std::ofstream(dir / "tokenizer_config.json") << "{";
              })),
              HasSubstr("tokenizer_config.json: not valid JSON"));
  // Special tokens that are not NllbTokenizer's.
  EXPECT_THAT(load_error(broken_copy(0, [](const fs::path& dir) {
                edit(dir / "config.json", [](json& config) { config["eos_token_id"] = 3; });
              })),
              HasSubstr("config.json: key 'eos_token_id' is 3, but NllbTokenizer gives '</s>' the id 2"));
  // Without any tokenizer file, ids still work and text says what is missing.
  const fs::path dir = broken_copy(0, [](const fs::path& d) {
    for (const char* file : {"sentencepiece.bpe.model", "tokenizer_config.json", "special_tokens_map.json"})
      fs::remove(d / file);
    edit(d / "config.json", [](json& config) { config.erase("tokenizer_class"); });
  });
  const auto model = LoadedModel::load(dir);
  EXPECT_TRUE(model->languages().empty());
  EXPECT_THAT(error_of([&] { model->tokenize_source("dogs"); }),
              HasSubstr("has no tokenizer (sentencepiece.bpe.model and tokenizer_config.json)"));
  fs::remove_all(dir);
}

// As GenerationConfig.from_model_config: without generation_config.json, NLLB's
// config.json (which holds max_length 200) supplies the decoding defaults.
TEST(M2M100Files, ConfigJsonStandsInForAMissingGenerationConfig) {
  const fs::path dir = broken_copy(0, [](const fs::path& d) {
    fs::remove(d / "generation_config.json");
    edit(d / "config.json", [](json& config) { config["max_length"] = 7; config["num_beams"] = 2; });
  });
  const auto model = LoadedModel::load(dir);
  EXPECT_EQ(model->generation().decoding.max_length, 6);  // transformers counts decoder_start
  EXPECT_EQ(model->generation().decoding.beam_size, 2);
  EXPECT_THAT(model->generation().source, HasSubstr("config.json"));
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------
// The command line: --source-lang and --target-lang.

std::string model_flag(std::size_t index = 0) {
  return "--model " + testing_support::shell_quote((parity_dir() / m2m100_models().at(index)).string());
}

int lines_of(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

TEST(M2M100Files, TheCommandLineTakesTheLanguagesAndRefusesBadOnesAsUsageErrors) {
  const json reference = read_json(parity_dir() / m2m100_models().front() / "reference.json");
  const json& first = reference.at("translations").front();
  const std::string langs = " --source-lang " + first.at("source_lang").get<std::string>() + " --target-lang " +
                            first.at("target_lang").get<std::string>();
  const std::string text = testing_support::shell_quote(first.at("text"));
  const auto translated = testing_support::run_ordo(
      "translate " + model_flag() + langs + " --json --max-length " + std::to_string(first.at("ids").size()) + " " + text);
  ASSERT_EQ(translated.exit_code, 0) << translated.err;
  EXPECT_EQ(json::parse(translated.out).at("target_ids"), first.at("ids"));
  EXPECT_EQ(json::parse(translated.out).at("source_ids"), first.at("source_ids"));

  const auto tokenized = testing_support::run_ordo("tokenize " + model_flag() + langs + " --json " + text);
  ASSERT_EQ(tokenized.exit_code, 0) << tokenized.err;
  EXPECT_EQ(json::parse(tokenized.out).at("ids"), first.at("source_ids"));

  const auto scored = testing_support::run_ordo("score " + model_flag() + langs + " --source " + text +
                                                " --target 'Hunde' --json");
  EXPECT_EQ(scored.exit_code, 0) << scored.err;
  const fs::path csv = temp_dir("m2m100-viz") / "cross.csv";
  const auto pictured = testing_support::run_ordo("viz attention " + model_flag() + langs + " --kind cross --max-length 3 "
                                                  "--out " + testing_support::shell_quote(csv.string()) + " " + text);
  EXPECT_EQ(pictured.exit_code, 0) << pictured.err;
  EXPECT_TRUE(fs::exists(csv));
  fs::remove_all(csv.parent_path());

  // Missing, unknown, or given to a model without codes: exit 2, one line naming the flag.
  const fs::path data = temp_dir("m2m100-eval") / "test.tsv";
  std::ofstream(data) << "the dogs\tdie Hunde\n";
  for (const auto& [arguments, message] :
       {std::pair{"translate " + model_flag() + " --target-lang deu_Latn " + text,
                  "--source-lang: this model translates between languages and needs a language code, one of: "
                  "deu_Latn, eng_Latn, fra_Latn, nds_Latn, spa_Latn"},
        std::pair{"translate " + model_flag() + " --source-lang eng_Latn --target-lang xyz_Latn " + text,
                  "--target-lang: unknown language code \"xyz_Latn\"; this model's codes: deu_Latn"},
        std::pair{"score " + model_flag() + " --source-lang eng_Latn --source a --target b",
                  "--target-lang: this model translates between languages"},
        std::pair{"eval " + model_flag() + " --source-lang eng_Latn --data " + testing_support::shell_quote(data.string()),
                  "--target-lang: this model translates between languages"},
        std::pair{"tokenize " + model_flag() + " " + text, "--source-lang: this model translates between languages"},
        std::pair{"viz attention " + model_flag() + " --source-lang eng_Latn --kind cross --out /tmp/never.csv " + text,
                  "--target-lang: this model translates between languages"},
        std::pair{std::string("viz attention --model german-llama --target-lang deu_Latn --out /tmp/never.csv Die"),
                  "--target-lang: this model has no language codes"},
        std::pair{std::string("translate --source-lang eng_Latn --target-lang deu_Latn dogs"),
                  "--source-lang: this model has no language codes (it translates one pair)"},
        std::pair{std::string("compare --source-lang eng_Latn --target-lang deu_Latn a b"),
                  "--source-lang: this model has no language codes"}}) {
    SCOPED_TRACE(arguments);
    const auto result = testing_support::run_ordo(arguments);
    EXPECT_EQ(result.exit_code, 2) << result.out;
    EXPECT_EQ(lines_of(result.err), 1) << result.err;
    EXPECT_THAT(result.err, HasSubstr(message));
  }
  fs::remove_all(data.parent_path());
  // Broken files: exit 1, one line.
  const fs::path dir = broken_copy(0, [](const fs::path& d) {
    edit(d / "tokenizer_config.json", [](json& config) { config["tokenizer_class"] = "T5Tokenizer"; });
  });
  const auto broken =
      testing_support::run_ordo("translate --model " + testing_support::shell_quote(dir.string()) + langs + " dogs");
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_EQ(lines_of(broken.err), 1) << broken.err;
  EXPECT_THAT(broken.err, HasSubstr("tokenizer_class"));
  fs::remove_all(dir);
  // inspect lists the codes.
  const auto inspect = testing_support::run_ordo("inspect " + model_flag());
  EXPECT_THAT(inspect.out, HasSubstr("language codes (5): deu_Latn eng_Latn fra_Latn nds_Latn spa_Latn"));
}

// generate --source on a multilingual model: the flags translate takes, the prompt after
// the target's code (what tokenize --as prompt shows), and the same usage errors.
TEST(M2M100Files, GenerateTakesTheLanguagesAsTranslateDoes) {
  const json reference = read_json(parity_dir() / m2m100_models().front() / "reference.json");
  const json& first = reference.at("translations").front();
  const std::string target_lang = first.at("target_lang");
  const std::string langs = " --source-lang " + first.at("source_lang").get<std::string>() + " --target-lang " +
                            target_lang;
  const std::string text = testing_support::shell_quote(first.at("text"));
  const auto ids = first.at("ids").get<std::vector<int>>();
  const int code = reference.at("codes").at(target_lang).get<int>();
  const auto generated = testing_support::run_ordo("generate " + model_flag() + langs + " --json --max-length " +
                                                   std::to_string(ids.size() - 1) + " --source " + text);
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  const json result = json::parse(generated.out);
  EXPECT_EQ(result.at("source_ids"), first.at("source_ids"));
  EXPECT_EQ(result.at("prompt_ids"), json::array({code}));
  EXPECT_EQ(result.at("generated_ids").get<std::vector<int>>(), std::vector<int>(ids.begin() + 1, ids.end()));
  // Text in, text out, streamed: the translation's text (the code has none).
  const auto streamed = testing_support::run_ordo("generate " + model_flag() + langs + " --max-length " +
                                                  std::to_string(ids.size() - 1) + " --source " + text);
  ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
  const Model model = Model::load(parity_dir() / m2m100_models().front());
  EXPECT_EQ(streamed.out, model.detokenize_target(ids) + "\n");
  // A prompt follows the code; tokenize --as prompt shows those very ids.
  const auto prompted = testing_support::run_ordo("generate " + model_flag() + langs +
                                                  " --json --max-length 2 --source " + text + " 'die Hunde'");
  ASSERT_EQ(prompted.exit_code, 0) << prompted.err;
  const auto shown = testing_support::run_ordo("tokenize " + model_flag() + langs + " --as prompt --json 'die Hunde'");
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(json::parse(prompted.out).at("prompt_ids"), json::parse(shown.out).at("ids"));
  EXPECT_EQ(json::parse(shown.out).at("ids").front(), code);

  for (const auto& [arguments, message] :
       {std::pair{"generate " + model_flag() + " --target-lang deu_Latn --source " + text,
                  "--source-lang: this model translates between languages and needs a language code, one of: "
                  "deu_Latn, eng_Latn, fra_Latn, nds_Latn, spa_Latn"},
        std::pair{"generate " + model_flag() + " --source-lang eng_Latn --source " + text + " die",
                  "--target-lang: this model translates between languages"},
        std::pair{"generate " + model_flag() + " --source-lang eng_Latn --target-lang xyz_Latn --source " + text,
                  "--target-lang: unknown language code \"xyz_Latn\"; this model's codes: deu_Latn"},
        std::pair{"tokenize " + model_flag() + " --as prompt die", "--target-lang: this model translates between"},
        std::pair{std::string("generate --source-lang eng_Latn --target-lang deu_Latn --source dogs"),
                  "--source-lang: this model has no language codes (it translates one pair)"},
        std::pair{std::string("generate --model german-llama --target-lang deu_Latn Die"),
                  "--target-lang: this model has no language codes"}}) {
    SCOPED_TRACE(arguments);
    const auto failed = testing_support::run_ordo(arguments);
    EXPECT_EQ(failed.exit_code, 2) << failed.out;
    EXPECT_EQ(lines_of(failed.err), 1) << failed.err;
    EXPECT_THAT(failed.err, HasSubstr(message));
    EXPECT_EQ(failed.out, "");
  }
}

}  // namespace
}  // namespace ordo
