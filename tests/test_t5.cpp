// The T5 family (model_type "t5" and "mt5", Hugging Face's T5ForConditionalGeneration):
// its config.json (models/t5_config.h), its tensor table, the engine's building blocks it
// names (unscaled attention scores, an inner width num_heads x d_kv apart from d_model,
// a tied head read through d_model^-0.5, RMS norms, gated feed-forwards, relative-position
// buckets held by each stack's first block), its tokenizer (spiece.model; T5Tokenizer's
// sentinels) and every way they can be wrong, each one line naming the file and the key.
//
// T5Parity.* compares the oracle's T5 models (tools/oracle/make_parity_models.py,
// "t5_models" of its index; tools/oracle/ordo_torch/t5.py is written from transformers'
// modeling_t5.py) with test_marian.cpp's tolerances: log-probs and encoder outputs within
// 1e-4 absolute (float32 against the oracle's float64), greedy and beam ids identical
// (cases are kept only with margins >= 1e-2 and 1e-3), beam scores within 1e-4. Token ids
// must be the SentencePiece Python module's own, then </s>, as T5Tokenizer gives them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/attention_recorder.h"
#include "engine/decode_inputs.h"
#include "engine/error.h"
#include "engine/score.h"
#include "engine/search.h"
#include "models/loaded_model.h"
#include "models/tensor_names.h"
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

// t5-small's config.json as save_pretrained writes it (every T5Config key, and what older
// transformers versions added), made small.
json t5_small_config() {
  return json::parse(R"({
    "architectures": ["T5ForConditionalGeneration"], "classifier_dropout": 0.0, "d_ff": 24, "d_kv": 6,
    "d_model": 16, "decoder_start_token_id": 0, "dense_act_fn": "relu", "dropout_rate": 0.1, "eos_token_id": 1,
    "feed_forward_proj": "relu", "initializer_factor": 1.0, "is_encoder_decoder": true, "is_gated_act": false,
    "layer_norm_epsilon": 1e-06, "model_type": "t5", "n_positions": 512, "num_decoder_layers": 2, "num_heads": 3,
    "num_layers": 2, "output_past": true, "pad_token_id": 0, "relative_attention_max_distance": 20,
    "relative_attention_num_buckets": 8,
    "task_specific_params": {"translation_en_to_de": {"early_stopping": true, "max_length": 300, "num_beams": 4,
                             "prefix": "translate English to German: "}},
    "torch_dtype": "float32", "transformers_version": "4.44.0", "use_cache": true, "vocab_size": 40})");
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

Shape shape_of(const ModelConfig& config, const std::string& name) {
  for (const TensorSpec& spec : expected_tensors(config))
    if (spec.name == name) return spec.shape;
  return {};
}

// ---------------------------------------------------------------------------------------
// config.json and the tensor table.

TEST(T5, ConfigAsSavePretrainedWritesItMapsOntoTheEngine) {
  const ModelConfig c = ModelConfig::from_json(t5_small_config(), "config.json");
  EXPECT_EQ(c.family, Family::T5);
  EXPECT_EQ(c.vocab_size, 40);
  EXPECT_EQ(c.decoder_vocab_size, 40);
  EXPECT_EQ(c.d_model, 16);
  EXPECT_EQ(c.encoder_attention_heads, 3);
  EXPECT_EQ(c.decoder_attention_heads, 3);
  EXPECT_EQ(c.encoder_head_dim(), 6);  // d_kv, not d_model / heads
  EXPECT_EQ(c.decoder_head_dim, 6);
  EXPECT_EQ(c.encoder_ffn_dim, 24);
  EXPECT_EQ(c.feed_forward_kind, FeedForwardKind::Plain);
  EXPECT_EQ(c.activation_function, Activation::Relu);
  EXPECT_TRUE(c.normalize_before);
  EXPECT_EQ(c.norm_kind, NormKind::RmsNorm);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-6);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.attention_scaling, ScoreScaling::None);
  EXPECT_FALSE(c.scale_embedding);
  EXPECT_EQ(c.position_encoding, PositionEncoding::T5Relative);
  EXPECT_EQ(c.relative_attention_num_buckets, 8);
  EXPECT_EQ(c.relative_attention_max_distance, 20);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.scale_tied_head);
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_EQ(c.decoder_start_token_id, 0);

  // Absent keys take T5Config's defaults; an mt5 config MT5Config's.
  const ModelConfig t5 = ModelConfig::from_json({{"model_type", "t5"}}, "config.json");
  EXPECT_EQ(t5.vocab_size, 32128);
  EXPECT_EQ(t5.d_model, 512);
  EXPECT_EQ(t5.decoder_head_dim, 64);
  EXPECT_EQ(t5.decoder_ffn_dim, 2048);
  EXPECT_EQ(t5.encoder_layers, 6);
  EXPECT_EQ(t5.decoder_layers, 6);
  EXPECT_EQ(t5.decoder_attention_heads, 8);
  EXPECT_EQ(t5.relative_attention_num_buckets, 32);
  EXPECT_EQ(t5.relative_attention_max_distance, 128);
  EXPECT_EQ(t5.feed_forward_kind, FeedForwardKind::Plain);
  EXPECT_TRUE(t5.tie_word_embeddings);
  EXPECT_EQ(t5.decoder_start_token_id, 0);
  const ModelConfig mt5 = ModelConfig::from_json({{"model_type", "mt5"}}, "config.json");
  EXPECT_EQ(mt5.family, Family::T5);
  EXPECT_EQ(mt5.model_type, "mt5");
  EXPECT_EQ(mt5.vocab_size, 250112);
  EXPECT_EQ(mt5.decoder_ffn_dim, 1024);
  EXPECT_EQ(mt5.encoder_layers, 8);
  EXPECT_EQ(mt5.decoder_attention_heads, 6);
  EXPECT_EQ(mt5.feed_forward_kind, FeedForwardKind::Gated);
  EXPECT_EQ(mt5.activation_function, Activation::GeluTanh);  // gated-gelu is gelu_new
  EXPECT_FALSE(mt5.tie_word_embeddings);

  // The feed-forward names T5Config reads.
  for (const auto& [proj, kind, act] : std::vector<std::tuple<std::string, FeedForwardKind, Activation>>{
           {"gated-gelu", FeedForwardKind::Gated, Activation::GeluTanh},
           {"gated-relu", FeedForwardKind::Gated, Activation::Relu},
           {"gated-silu", FeedForwardKind::Gated, Activation::Silu},
           {"gated-gelu_new", FeedForwardKind::Gated, Activation::GeluTanh},
           {"gelu", FeedForwardKind::Plain, Activation::Gelu}}) {
    const json config = with(t5_small_config(), {{"feed_forward_proj", proj}, {"dense_act_fn", nullptr}});
    json cleaned = config;
    cleaned.erase("dense_act_fn");
    cleaned.erase("is_gated_act");
    const ModelConfig f = ModelConfig::from_json(cleaned, "c");
    EXPECT_EQ(f.feed_forward_kind, kind) << proj;
    EXPECT_EQ(f.activation_function, act) << proj;
  }

  // inspect shows the family's own keys, and they read back to the same config.
  for (const ModelConfig& shown_config : {c, mt5}) {
    const json shown = shown_config.to_json();
    for (const char* internal : {"position_encoding", "normalize_before", "norm", "head_dim", "encoder_layers",
                                 "max_position_embeddings"})
      EXPECT_FALSE(shown.contains(internal)) << internal;
    EXPECT_EQ(ModelConfig::from_json(shown, "shown").to_json(), shown);
  }
  EXPECT_EQ(c.to_json().at("d_kv"), 6);
  EXPECT_EQ(mt5.to_json().at("feed_forward_proj"), "gated-gelu");
  EXPECT_EQ(mt5.to_json().at("dense_act_fn"), "gelu_new");
}

TEST(T5, TableIsSavePretrainedsLayout) {
  const ModelConfig tied = ModelConfig::from_json(with(t5_small_config(), {{"num_layers", 1}, {"num_decoder_layers", 1}}), "c");
  const auto required = names_of(tied, true);
  for (const char* present :
       {"shared.weight", "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
        "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", "encoder.final_layer_norm.weight",
        "decoder.final_layer_norm.weight", "encoder.block.0.layer.0.SelfAttention.q.weight",
        "encoder.block.0.layer.0.layer_norm.weight", "encoder.block.0.layer.1.DenseReluDense.wi.weight",
        "encoder.block.0.layer.1.DenseReluDense.wo.weight", "encoder.block.0.layer.1.layer_norm.weight",
        "decoder.block.0.layer.1.EncDecAttention.k.weight", "decoder.block.0.layer.1.layer_norm.weight",
        "decoder.block.0.layer.2.DenseReluDense.wi.weight", "decoder.block.0.layer.2.layer_norm.weight"})
    EXPECT_TRUE(required.contains(present)) << present;
  for (const char* absent : {"encoder.block.0.layer.1.DenseReluDense.wi_0.weight",
                             "encoder.block.0.layer.0.SelfAttention.q.bias", "encoder.final_layer_norm.bias"})
    EXPECT_FALSE(names_of(tied).contains(absent)) << absent;
  // Tied duplicates save_pretrained leaves out and older files hold, and the original
  // checkpoints' cross-attention table transformers ignores: optional, read by nothing.
  for (const char* copy : {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight",
                           "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight"}) {
    EXPECT_TRUE(names_of(tied).contains(copy)) << copy;
    EXPECT_FALSE(required.contains(copy)) << copy;
  }
  // 1 shared + 2 tables + 2 final norms; encoder block 4 + 1 + 2 + 1; decoder 4 + 1 + 4 + 1 + 2 + 1.
  EXPECT_EQ(required.size(), 5u + 8 + 13);
  // The inner width num_heads x d_kv = 18, d_model 16.
  EXPECT_EQ(shape_of(tied, "encoder.block.0.layer.0.SelfAttention.q.weight"), (Shape{18, 16}));
  EXPECT_EQ(shape_of(tied, "decoder.block.0.layer.1.EncDecAttention.o.weight"), (Shape{16, 18}));
  EXPECT_EQ(shape_of(tied, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"), (Shape{8, 3}));

  const ModelConfig gated = ModelConfig::from_json(
      with(t5_small_config(), {{"feed_forward_proj", "gated-gelu"}, {"dense_act_fn", "gelu_new"}, {"is_gated_act", true},
                               {"tie_word_embeddings", false}}),
      "c");
  const auto names = names_of(gated, true);
  for (const char* present : {"lm_head.weight", "encoder.block.1.layer.1.DenseReluDense.wi_0.weight",
                              "encoder.block.1.layer.1.DenseReluDense.wi_1.weight",
                              "decoder.block.1.layer.2.DenseReluDense.wi_1.weight"})
    EXPECT_TRUE(names.contains(present)) << present;
  EXPECT_FALSE(names.contains("encoder.block.0.layer.1.DenseReluDense.wi.weight"));
  // The published checkpoints' tensor counts: t5-small (T5Config's defaults) 131;
  // flan-t5-small (8 + 8 gated blocks of 6 heads, untied) 190.
  EXPECT_EQ(names_of(ModelConfig::from_json({{"model_type", "t5"}}, "c"), true).size(), 131u);
  EXPECT_EQ(names_of(ModelConfig::from_json({{"model_type", "t5"}, {"num_layers", 8}, {"num_heads", 6},
                                             {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}},
                                            "c"),
                     true)
                .size(),
            190u);
  // Only the first block of a stack holds the relative-position table.
  EXPECT_FALSE(names_of(gated).contains("encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"));
}

TEST(T5, BadConfigsAreOneLineNamingTheKey) {
  EXPECT_THAT(config_error(with(t5_small_config(), {{"d_kv", "6"}})),
              HasSubstr("dir/config.json: key 'd_kv': expected an integer, got a string (\"6\")"));
  EXPECT_THAT(config_error(with(t5_small_config(), {{"num_heads", 2.5}})), HasSubstr("key 'num_heads': expected an integer"));
  EXPECT_THAT(config_error(with(t5_small_config(), {{"tie_word_embeddings", "no"}})),
              HasSubstr("key 'tie_word_embeddings': expected true or false"));
  EXPECT_THAT(config_error(with(t5_small_config(), {{"layer_norm_epsilon", "1e-6"}})),
              HasSubstr("key 'layer_norm_epsilon': expected a number"));
  EXPECT_THAT(config_error(with(t5_small_config(), {{"dropout_rate", nullptr}})), HasSubstr("key 'dropout_rate': expected a number"));
  EXPECT_THAT(config_error(with(t5_small_config(), {{"feed_forward_proj", 3}})),
              HasSubstr("key 'feed_forward_proj': expected a string"));
  for (const char* unknown : {"gated-quick_gelu", "gelu-new", "gated-gated-gelu", "swiglu", ""})
    EXPECT_THAT(config_error(with(t5_small_config(), {{"feed_forward_proj", unknown}})),
                HasSubstr(std::string("key 'feed_forward_proj': unknown value \"") + unknown + "\""))
        << unknown;
  EXPECT_THAT(config_error(with(t5_small_config(), {{"dense_act_fn", "gelu_new"}})),
              HasSubstr("key 'dense_act_fn': is \"gelu_new\", but feed_forward_proj says relu"));
  EXPECT_THAT(config_error(with(t5_small_config(), {{"is_gated_act", true}})),
              HasSubstr("key 'is_gated_act': is true, but feed_forward_proj says not gated"));
  EXPECT_THAT(config_error(with(t5_small_config(), {{"is_encoder_decoder", false}})),
              HasSubstr("key 'is_encoder_decoder': is false"));
  EXPECT_THAT(config_error(with(t5_small_config(), {{"d_kv", 0}})), HasSubstr("key 'd_kv': must be > 0, got 0"));
  EXPECT_THAT(config_error(with(t5_small_config(), {{"num_decoder_layers", -1}})),
              HasSubstr("key 'num_decoder_layers': must be > 0"));
  EXPECT_NO_THROW(ModelConfig::from_json(with(t5_small_config(), {{"num_decoder_layers", nullptr}}), "c"));
  EXPECT_THAT(config_error(with(t5_small_config(), {{"eos_token_id", 40}})),
              HasSubstr("key 'eos_token_id': token id 40 is outside [0, vocab_size=40)"));
  EXPECT_THAT(config_error(with(t5_small_config(), {{"relative_attention_num_buckets", 2}})),
              HasSubstr("key 'relative_attention_num_buckets': needs at least 4 buckets"));
  EXPECT_THAT(config_error(with(t5_small_config(), {{"relative_attention_max_distance", 4}})),
              HasSubstr("key 'relative_attention_max_distance': must be more than relative_attention_num_buckets / 2 = 4"));
  EXPECT_THAT(config_error(with(t5_small_config(), {{"layer_norm_epsilon", 0}})), HasSubstr("key 'layer_norm_epsilon'"));
}

// ---------------------------------------------------------------------------------------
// The building blocks T5 names.

// ScoreScaling::None: each head's probabilities are softmax(q_h k_h^T), no 1/sqrt(dh).
// Oracle: reference::softmax_rows in double, tolerance 1e-6 (as test_attention_capture).
TEST(T5, UnscaledAttentionIsTheSoftmaxOfQKTransposed) {
  std::mt19937 rng(3);
  const Index heads = 3, dh = 6, tq = 4, tk = 5;
  const Matrix q = reference::random_matrix(tq, heads * dh, rng);
  const Matrix k = reference::random_matrix(tk, heads * dh, rng);
  const Matrix v = reference::random_matrix(tk, heads * dh, rng);
  for (const ScoreScaling scaling : {ScoreScaling::None, ScoreScaling::InverseSqrtHeadDim}) {
    AttentionRecorder recorder;
    Matrix scores, context(tq, heads * dh);
    scaled_dot_product_attention(q, k, v, heads, AttentionMask{false, 0}, nullptr, scores, context,
                                 {&recorder, AttentionKind::Encoder, 0, 0}, scaling);
    const double factor = scaling == ScoreScaling::None ? 1.0 : 1.0 / std::sqrt(static_cast<double>(dh));
    for (Index h = 0; h < heads; ++h) {
      reference::Matrix64 s = reference::matmul_nt(reference::Matrix64(q.view().col_block(h * dh, dh)),
                                                   reference::Matrix64(k.view().col_block(h * dh, dh)));
      for (Index i = 0; i < s.rows(); ++i)
        for (Index j = 0; j < s.cols(); ++j) s(i, j) *= factor;
      reference::expect_close(recorder.at({AttentionKind::Encoder, 0, 0, h}), reference::softmax_rows(s), 1e-6, 1e-6);
    }
  }
}

// A random t5-small-shaped model in a fresh directory; `edit` changes its tensors.
fs::path random_t5(const json& config, const std::function<void(std::vector<NamedTensor>&)>& edit = {}) {
  const fs::path dir = temp_dir("t5");
  write_random_model(dir, config, 11, edit);
  return dir;
}

std::vector<float> scores_of(const fs::path& dir) {
  const auto model = LoadedModel::load(dir);
  const std::vector<int> source{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 1}, target{7, 8, 9, 1};
  return score_target(model->transformer(), source, target);
}

double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double most = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) most = std::max(most, std::abs(double(a[i]) - b[i]));
  return most;
}

// The untied twin of a tied model's tensors: every tensor as in `tied`, and lm_head.weight
// = shared.weight / divisor.
fs::path untied_twin(const std::vector<NamedTensor>& tied, float divisor) {
  const auto find = [&](const std::string& name) {
    return std::find_if(tied.begin(), tied.end(), [&](const NamedTensor& x) { return x.name == name; });
  };
  return random_t5(with(t5_small_config(), {{"tie_word_embeddings", false}}), [&](std::vector<NamedTensor>& t) {
    for (NamedTensor& x : t) {
      x.values = find(x.name == "lm_head.weight" ? "shared.weight" : x.name)->values;
      if (x.name == "lm_head.weight")
        for (float& v : x.values) v /= divisor;
    }
  });
}

TEST(T5, ATiedHeadReadsThroughDModelToTheMinusHalf) {
  // A tied head scaled by 1/sqrt(d_model=16) = 1/4 is an untied head holding shared.weight / 4.
  std::vector<NamedTensor> kept;
  const fs::path tied = random_t5(t5_small_config(), [&](std::vector<NamedTensor>& t) { kept = t; });
  const fs::path quarter = untied_twin(kept, 4.0f), whole = untied_twin(kept, 1.0f);
  const auto a = scores_of(tied), b = scores_of(quarter);
  reference::expect_close(a, std::vector<double>(b.begin(), b.end()), 1e-5, 0.0);
  // Without the scale the scores would differ.
  EXPECT_GT(largest_difference(a, scores_of(whole)), 1e-3);
  for (const auto& dir : {tied, quarter, whole}) fs::remove_all(dir);
}

TEST(T5, TiedCopiesAndTheCrossAttentionTableAreReadByNothing) {
  const json config = t5_small_config();
  // write_random_model writes the optional tensors too, each with its own random values.
  const fs::path with_copies = random_t5(config);
  const fs::path without = random_t5(config, [](std::vector<NamedTensor>& t) {
    std::erase_if(t, [](const NamedTensor& x) {
      return x.name.ends_with("embed_tokens.weight") || x.name == "lm_head.weight" ||
             x.name == "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight";
    });
  });
  std::vector<std::string> warnings;
  (void)LoadedModel::load(with_copies, [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_TRUE(warnings.empty()) << warnings.front();  // known tensors, not unused ones
  EXPECT_EQ(scores_of(with_copies), scores_of(without));
  // The relative-position table is read: another one changes the scores.
  const fs::path other_bias = random_t5(config, [](std::vector<NamedTensor>& t) {
    for (NamedTensor& x : t)
      if (x.name.starts_with("encoder.block.0.layer.0.SelfAttention.relative_attention_bias"))
        for (float& v : x.values) v *= -4.0f;
  });
  EXPECT_GT(largest_difference(scores_of(without), scores_of(other_bias)), 1e-3);
  for (const auto& dir : {with_copies, without, other_bias}) fs::remove_all(dir);
}

TEST(T5, AMissingTensorIsNamedWithItsShape) {
  const fs::path dir = random_t5(t5_small_config(), [](std::vector<NamedTensor>& t) {
    std::erase_if(t, [](const NamedTensor& x) { return x.name == "decoder.block.1.layer.2.DenseReluDense.wo.weight"; });
  });
  EXPECT_THAT(error_of([&] { LoadedModel::load(dir); }), HasSubstr("decoder.block.1.layer.2.DenseReluDense.wo.weight"));
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------
// Parity with the oracle.

std::vector<std::string> t5_models() {
  return read_json(parity_dir() / "index.json").at("t5_models").get<std::vector<std::string>>();
}

TEST(T5Parity, OracleCoversTheVariants) {
  std::set<std::string> kinds;
  for (const std::string& name : t5_models()) {
    const auto model = LoadedModel::load(parity_dir() / name);
    const ModelConfig& c = model->config();
    const json reference = read_json(parity_dir() / name / "reference.json");
    EXPECT_EQ(c.family, Family::T5);
    kinds.insert(c.model_type);
    kinds.insert(c.tie_word_embeddings ? "tied" : "untied");
    kinds.insert(c.to_json().at("feed_forward_proj").get<std::string>());
    kinds.insert(c.decoder_attention_heads * c.decoder_head_dim != c.d_model ? "inner width" : "d_model width");
    kinds.insert(c.encoder_layers != c.decoder_layers ? "asymmetric" : "symmetric");
    kinds.insert(reference.at("embed_copies_in_file").get<bool>() ? "copies in file" : "no copies");
    kinds.insert(reference.at("extra_ids").is_null() ? "no tokenizer_config" : "tokenizer_config");
    kinds.insert(model->weights().files().size() > 1 ? "sharded" : "single file");
    kinds.insert(reference.at("dtype").get<std::string>());
  }
  for (const char* want : {"t5", "mt5", "tied", "untied", "relu", "gated-gelu", "gated-silu", "inner width",
                           "d_model width", "asymmetric", "copies in file", "no copies", "no tokenizer_config",
                           "tokenizer_config", "sharded", "single file", "F32", "F16", "BF16"})
    EXPECT_TRUE(kinds.contains(want)) << "no T5 oracle model covers " << want;
}

TEST(T5Parity, EveryModelScoresAndTranslatesAsPyTorch) {
  double worst = 0;
  for (const std::string& name : t5_models()) {
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
  std::cout << "[ parity ] T5: worst |log-prob error| " << worst << '\n';
}

TEST(T5Parity, TokenizationIsT5Tokenizers) {
  for (const std::string& name : t5_models()) {
    SCOPED_TRACE("model " + name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const json reference = read_json(parity_dir() / name / "reference.json");
    ASSERT_FALSE(reference.at("tokenization").empty());
    for (const json& c : reference.at("tokenization")) {
      const std::string text = c.at("text");
      SCOPED_TRACE(text);
      const auto want = c.at("ids").get<std::vector<int>>();
      EXPECT_EQ(model->tokenize_source(text), want);
      EXPECT_EQ(model->tokenize_target(text), want);  // one tokenizer for both sides
      EXPECT_EQ(model->tokenize_prompt(text, true), std::vector<int>(want.begin(), want.end() - 1));  // no bos
    }
    // Sentinels decode as T5Tokenizer writes them.
    for (const json& c : reference.at("detokenization")) {
      SCOPED_TRACE(c.dump());
      EXPECT_EQ(model->detokenize_source(c.at("ids").get<std::vector<int>>()), c.at("text").get<std::string>());
    }
    const std::string plain = "the clever young teachers chase dogs";
    EXPECT_EQ(model->detokenize_target(model->tokenize_target(plain)), plain);
  }
}

TEST(T5Parity, TheCommandLineTranslatesTextAndShowsTheFamilysKeys) {
  const std::string model_flag = "--model " + testing_support::shell_quote((parity_dir() / t5_models().front()).string());
  const auto translated = testing_support::run_ordo("translate " + model_flag + " --json 'translate: dogs chase cats'");
  ASSERT_EQ(translated.exit_code, 0) << translated.err;
  EXPECT_EQ(json::parse(translated.out).at("source_ids").back(), 1);  // </s>
  const auto inspect = testing_support::run_ordo("inspect " + model_flag);
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_THAT(inspect.out, HasSubstr("feed_forward_proj"));
  EXPECT_THAT(inspect.out, HasSubstr("d_kv"));
}

// ---------------------------------------------------------------------------------------
// Broken tokenizer files: one line naming the file, exit 1.

// A copy of an oracle model (the first with tokenizer_config.json's extra_ids 100) with
// its files changed.
fs::path broken_copy(const std::function<void(const fs::path&)>& change) {
  const fs::path dir = temp_dir("t5-files");
  fs::copy(parity_dir() / t5_models().front(), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  change(dir);
  return dir;
}

json read_file_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

void edit_config(const fs::path& dir, const json& changes) {
  json config = read_file_json(dir / "config.json");
  config.update(changes);
  std::ofstream(dir / "config.json") << config.dump();
}

std::string load_error(const fs::path& dir) {
  const std::string message = error_of([&] { LoadedModel::load(dir); });
  fs::remove_all(dir);
  return message;
}

TEST(T5Files, ASentencePieceModelOfAnotherModelIsRefusedByName) {
  // </s> is piece 1 of spiece.model; a config that says eos is 2 is another model's.
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) { edit_config(dir, {{"eos_token_id", 2}}); })),
              HasSubstr("spiece.model: gives '</s>' the id 1, but config.json's eos_token_id is 2"));
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) { edit_config(dir, {{"pad_token_id", 3}}); })),
              HasSubstr("spiece.model: gives '<pad>' the id 0, but config.json's pad_token_id is 3"));
  // 80 pieces and 100 sentinels do not fit 150 embedding rows.
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) {
                std::ofstream(dir / "tokenizer_config.json") << R"({"extra_ids": 5000})";
              })),
              HasSubstr("spiece.model: has 80 pieces, and with 5000 sentinels (tokenizer_config.json's extra_ids) "
                        "that is more than config.json's vocab_size="));
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) {
                std::ofstream(dir / "tokenizer_config.json") << R"({"extra_ids": "100"})";
              })),
              HasSubstr("tokenizer_config.json: key 'extra_ids': expected a non-negative integer, got \"100\""));
  EXPECT_THAT(load_error(broken_copy([](const fs::path& dir) { std::ofstream(dir / "spiece.model") << "not a model"; })),
              HasSubstr("spiece.model: is not a SentencePiece model"));
}

// As GenerationConfig.from_model_config: without generation_config.json, T5's
// config.json supplies the decoding defaults (the original t5 checkpoints' config.json
// holds task_specific_params, read by nothing, and may hold num_beams and max_length).
TEST(T5Files, ConfigJsonStandsInForAMissingGenerationConfig) {
  const fs::path dir = broken_copy([](const fs::path& d) {
    fs::remove(d / "generation_config.json");
    edit_config(d, {{"num_beams", 2}, {"max_length", 6}, {"no_repeat_ngram_size", 3},
                    {"task_specific_params", {{"translation_en_to_de", {{"num_beams", 4}}}}}});
  });
  const auto model = LoadedModel::load(dir);
  EXPECT_EQ(model->generation().decoding.beam_size, 2);
  EXPECT_EQ(model->generation().decoding.max_length, 5);  // transformers counts decoder_start
  EXPECT_EQ(model->generation().decoding.no_repeat_ngram_size, 3);
  EXPECT_THAT(model->generation().source, HasSubstr("config.json"));
  // With generation_config.json, config.json's keys are not read.
  std::ofstream(dir / "generation_config.json") << R"({"decoder_start_token_id": 0, "eos_token_id": 1})";
  EXPECT_EQ(LoadedModel::load(dir)->generation().decoding.beam_size, 1);
  fs::remove_all(dir);
}

TEST(T5Files, WithoutSpieceModelIdsStillWork) {
  const fs::path dir = broken_copy([](const fs::path& d) { fs::remove(d / "spiece.model"); });
  const auto model = LoadedModel::load(dir);
  EXPECT_THAT(error_of([&] { model->tokenize_source("dogs"); }), HasSubstr("has no tokenizer (spiece.model)"));
  EXPECT_FALSE(decode(model->transformer(), std::vector<int>{5, 6, 1}).front().ids.empty());
  fs::remove_all(dir);
}

TEST(T5Files, TheCommandLineSaysItInOneLineAndExits1) {
  for (const json& change : {json{{"eos_token_id", 2}}, json{{"feed_forward_proj", "gated-quick_gelu"}},
                             json{{"d_kv", "4"}}}) {
    const fs::path dir = broken_copy([&](const fs::path& d) { edit_config(d, change); });
    const auto result = testing_support::run_ordo("translate --model " + testing_support::shell_quote(dir.string()) + " dogs");
    EXPECT_EQ(result.exit_code, 1) << change;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_THAT(result.err, HasSubstr(change.begin().key())) << result.err;
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace ordo
