// Generation models against the PyTorch oracle (tools/oracle/make_parity_models.py, the
// `generation_models` of its index): decoder-only models in ordo's format for every
// position scheme, post- and pre-norm, with grouped-query attention; and models in
// Hugging Face's LLaMA layout with grouped-query ratios 1, 2 and 4, tied and untied,
// with and without attention and MLP biases, head_dim != hidden/heads, a list of eos
// ids, F32/F16/BF16, single-file and sharded. Same tolerances as test_parity.cpp, which
// derives them from float32's error against the oracle's float64: log-probs within 1e-4
// absolute (worst measured 1.9e-5 here), greedy and beam ids identical (the oracle keeps
// only cases whose decisions have margins >= 1e-2 for greedy and >= 1e-3 for beams).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/score.h"
#include "engine/search.h"
#include "models/loaded_model.h"
#include "tests/parity_support.h"
#include "tests/reference.h"

namespace ordo {
namespace {


using testing_support::parity_dir;
const auto& read_json = testing_support::read_oracle_json;

std::vector<std::string> generation_models() {
  return read_json(parity_dir() / "index.json").at("generation_models").get<std::vector<std::string>>();
}

std::vector<int> ids_of(const nlohmann::json& j) { return j.get<std::vector<int>>(); }

// Greedy continuations of `prompts`, as one batch.
std::vector<DecodeResult> greedy(const Transformer& t, const std::vector<std::vector<int>>& prompts, Index max_length) {
  std::vector<DecodeRequest> requests;
  for (const auto& p : prompts) requests.push_back({{}, p});
  DecodingOptions options;
  options.max_length = max_length;
  DecodeWorkspace workspace;
  return decode_requests(t, requests, options, {}, workspace);
}

TEST(GenerationParity, OracleCoversBothFamiliesAndTheirVariants) {
  std::set<std::string> kinds;
  for (const std::string& name : generation_models()) {
    const auto model = LoadedModel::load(parity_dir() / name);
    const ModelConfig& c = model->config();
    EXPECT_FALSE(c.has_encoder()) << name;
    kinds.insert(std::string(family_name(c.family)));
    kinds.insert("kv" + std::to_string(c.grouped_query_ratio()));
    kinds.insert(c.tie_word_embeddings ? "tied" : "untied");
    kinds.insert(std::string(position_encoding_name(c.position_encoding)) + (c.normalize_before ? "-pre" : "-post"));
    if (model->weights().files().size() > 1) kinds.insert("sharded");
    if (c.family == Family::Llama && c.attention_bias) kinds.insert("attention_bias");
    if (c.family == Family::Llama && c.mlp_bias) kinds.insert("mlp_bias");
    if (c.decoder_head_dim * c.decoder_attention_heads != c.d_model) kinds.insert("head_dim");
    if (!c.other_eos_token_ids.empty()) kinds.insert("eos list");
    if (c.rope_scaling.enabled()) {
      kinds.insert("rope_scaling " + std::string(rope_scaling_type_name(c.rope_scaling.type)));
      kinds.insert("rope_scaling in " + std::string(family_name(c.family)));
    }
    kinds.insert(read_json(parity_dir() / name / "reference.json").at("dtype").get<std::string>());
  }
  for (const char* want : {"ordo", "llama", "kv1", "kv2", "kv4", "tied", "untied", "sharded", "attention_bias",
                           "mlp_bias", "head_dim", "eos list", "F32", "F16", "BF16", "sinusoidal-post",
                           "sinusoidal-pre", "learned-post", "learned-pre", "rope-post", "rope-pre", "none-post",
                           "none-pre", "alibi-post", "alibi-pre", "t5_relative-post", "t5_relative-pre",
                           "rope_scaling linear", "rope_scaling dynamic", "rope_scaling yarn", "rope_scaling llama3",
                           "rope_scaling in llama", "rope_scaling in ordo"})
    EXPECT_TRUE(kinds.contains(want)) << "no generation model covers " << want;
}

// The scaled models' cases reach well past the trained length (at least 2.5x), and a
// dynamic model's greedy decodes cross its threshold mid-generation: prompts within
// max_position_embeddings whose continuations go beyond, where the KV cache holds keys
// rotated with the plain base and new tokens get a growing one (engine/rope_scaling.h).
TEST(GenerationParity, RopeScalingCasesReachPastTheTrainedLength) {
  std::size_t crossing = 0, scaled = 0;
  for (const std::string& name : generation_models()) {
    const ModelConfig c = ModelConfig::load(parity_dir() / name / "config.json");
    if (!c.rope_scaling.enabled()) continue;
    ++scaled;
    const Index trained = c.rope_scaling.original_max_position_embeddings > 0
                              ? c.rope_scaling.original_max_position_embeddings
                              : c.max_position_embeddings;
    Index longest = 0;
    const nlohmann::json reference = read_json(parity_dir() / name / "reference.json");
    for (const nlohmann::json& k : reference.at("cases")) {
      const auto prompt = static_cast<Index>(k.at("prompt_ids").size());
      const auto total = prompt + static_cast<Index>(k.at("greedy_ids").size()) + c.position_offset;
      longest = std::max(longest, total);
      if (c.rope_scaling.type == RopeScalingType::Dynamic && prompt + c.position_offset <= trained &&
          total > trained)
        ++crossing;
    }
    EXPECT_GE(longest * 2, trained * 5) << name << ": positions up to " << longest << " of " << trained;
  }
  EXPECT_GE(scaled, 7u);
  EXPECT_GE(crossing, 2u) << "no dynamic case crosses its threshold mid-generation";
}

TEST(GenerationParity, EveryModelScoresAndContinuesAsPyTorch) {
  double worst = 0.0;
  std::size_t tokens = 0, models = 0;
  for (const std::string& name : generation_models()) {
    SCOPED_TRACE("model " + name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const Transformer& t = model->transformer();
    const nlohmann::json reference = read_json(parity_dir() / name / "reference.json");
    for (const nlohmann::json& c : reference.at("cases")) {
      std::vector<int> sequence = ids_of(c.at("prompt_ids"));
      const std::vector<int> continuation = ids_of(c.at("continuation_ids"));
      sequence.insert(sequence.end(), continuation.begin(), continuation.end());
      SCOPED_TRACE("sequence " + nlohmann::json(sequence).dump());
      const std::vector<float> got = score_target(t, {}, sequence);
      const auto want = c.at("token_logprobs").get<std::vector<double>>();
      reference::expect_close(got, want, 1e-4, 0.0);
      for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
      tokens += got.size();

      const auto decoded = greedy(t, {ids_of(c.at("prompt_ids"))}, c.at("greedy_max_length").get<Index>());
      ASSERT_TRUE(decoded.front().ok()) << decoded.front().error;
      EXPECT_EQ(decoded.front().hypotheses.front().ids, ids_of(c.at("greedy_ids")));
    }
    ++models;
  }
  EXPECT_GE(models, 20u);
  std::cout << "[ parity ] " << models << " generation models, " << tokens << " scored tokens: worst |log-prob error| "
            << worst << '\n';
}

TEST(GenerationParity, BatchesMatchPyTorchBatches) {
  for (const std::string& name : generation_models()) {
    SCOPED_TRACE("model " + name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const Transformer& t = model->transformer();
    const nlohmann::json batch = read_json(parity_dir() / name / "reference.json").at("batch");
    const auto prompts = batch.at("prompts").get<std::vector<std::vector<int>>>();
    const auto sequences = batch.at("sequences").get<std::vector<std::vector<int>>>();
    const auto want_logprobs = batch.at("token_logprobs").get<std::vector<std::vector<double>>>();
    const auto want_ids = batch.at("greedy_ids").get<std::vector<std::vector<int>>>();

    const std::vector<Score> scored = score_batch(t, {}, sequences);
    const std::vector<DecodeResult> decoded = greedy(t, prompts, batch.at("greedy_max_length").get<Index>());
    ASSERT_EQ(scored.size(), sequences.size());
    ASSERT_EQ(decoded.size(), prompts.size());
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      SCOPED_TRACE("batch entry " + std::to_string(i));
      ASSERT_TRUE(scored[i].ok()) << scored[i].error;
      reference::expect_close(scored[i].token_logprobs, want_logprobs[i], 1e-4, 0.0);
      ASSERT_TRUE(decoded[i].ok()) << decoded[i].error;
      EXPECT_EQ(decoded[i].hypotheses.front().ids, want_ids[i]);
    }
  }
}

TEST(GenerationParity, BeamSearchMatchesTheOraclesBeamSearch) {
  std::size_t cases = 0;
  for (const std::string& name : generation_models()) {
    SCOPED_TRACE("model " + name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const nlohmann::json reference = read_json(parity_dir() / name / "reference.json");
    for (const nlohmann::json& c : reference.at("beam")) {
      SCOPED_TRACE("beam case " + c.dump().substr(0, 120));
      const std::vector<DecodeRequest> requests{{{}, ids_of(c.at("prompt_ids"))}};
      DecodeWorkspace workspace;
      const DecodeResult got =
          decode_requests(model->transformer(), requests, testing_support::beam_case_options(c), {}, workspace).front();
      ASSERT_TRUE(got.ok()) << got.error;
      testing_support::expect_oracle_hypotheses(got.hypotheses, c.at("hypotheses"));
      ++cases;
    }
  }
  EXPECT_GE(cases, 100u);
}

}  // namespace
}  // namespace ordo
