// ordo against an independent oracle: PyTorch.
//
// tools/oracle/make_parity_models.py (run by CTest as the fixture `oracle`, with Debian's
// python3-torch) builds random models in ordo's format with torch's own building blocks,
// for every position scheme x layout x {post-norm, pre-norm} x {F32, F16, BF16} and the
// config variants, and records per-token log-probabilities, greedy outputs and encoder
// outputs. The oracle computes in float64 from exactly the weights the files hold, so its
// answer is the same on every CPU (to ~4e-14, checked under ATEN_CPU_CAPABILITY default,
// avx2 and avx512); what the tolerances below absorb is ordo's own float32 rounding.
//
// Tolerance 1e-4 absolute, derived from float32's error: a rounding costs at most
// u = 2^-24 = 6e-8 relative; a logit here is the end of a chain of ~1500 dependent
// roundings (5 layer-equivalents of ~300 accumulations: projections, scores, softmax
// sums, norms, FFN, the output projection) on values up to ~30 (logits, residual
// streams), and rounding errors add like a random walk: sqrt(1500) x 6e-8 x 30 = 7e-5.
// Measured, worst over 717 tokens (printed by the test): 3.0e-5 to 7.9e-5 depending on
// which kernels OpenBLAS picks (OPENBLAS_CORETYPE Cooperlake, Haswell, Prescott; ordo's
// AVX2 and portable paths give the same), on one ill-conditioned model
// (rope-interleaved-post-f32) where PyTorch's own float32 is 5.8e-5 off the float64
// truth too. A wrong formula (a position off by one, a missing scale) costs > 1e-2.
//   - log-probabilities within 1e-4 absolute per token;
//   - encoder outputs within 1e-4 absolute (values up to ~3 after the last norm; worst
//     measured 2.2e-5);
//   - greedy ids identical (the oracle only keeps cases whose top-1/top-2 logit margin
//     is >= 1e-2 at every step, 100x the tolerance, so rounding cannot flip a choice);
//   - batches: all of a model's cases decoded and scored as one padded batch, in torch
//     with key-padding masks and in ordo with per-sequence lengths: same ids, log-probs
//     within 1e-4;
//   - beam search: the oracle's own beam search, written from the README's description,
//     beam 3 / n-best 3 at length penalties 1 and 0: same hypotheses in the same order,
//     scores within 1e-4 (cases are kept only when every decision's margin is >= 1e-3).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <span>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/decode_inputs.h"
#include "engine/score.h"
#include "engine/search.h"
#include "tests/greedy.h"
#include "models/loaded_model.h"
#include "tests/parity_support.h"
#include "tests/reference.h"
#include "tests/search_support.h"

namespace ordo {
namespace {


using testing_support::parity_dir;
const auto& read_json = testing_support::read_oracle_json;

std::vector<std::string> model_names() {
  const nlohmann::json json = read_json(parity_dir() / "index.json");
  const nlohmann::json& names = json.is_array() ? json : json.at("models");
  return names.get<std::vector<std::string>>();
}

TEST(Parity, OracleCoversEverySchemeLayoutNormAndDtype) {
  std::set<std::string> seen;
  for (const std::string& name : model_names()) {
    const nlohmann::json config = read_json(parity_dir() / name / "config.json");
    const std::string scheme = config.at("position_encoding");
    seen.insert(scheme);
    seen.insert(config.value("normalize_before", false) ? "pre-norm" : "post-norm");
    if (scheme == "sinusoidal") seen.insert("sinusoidal/" + config.value("sinusoidal_layout", std::string("interleaved")));
    if (scheme == "rope") seen.insert("rope/" + config.value("rope_layout", std::string("half")));
  }
  // Every scheme and layout config.json accepts (models/config.h), so a new one needs an oracle model.
  std::vector<std::string> expected{"pre-norm", "post-norm"};
  for (const std::string_view scheme : position_encoding_names()) expected.emplace_back(scheme);
  for (const std::string_view layout : sinusoidal_layout_names()) expected.push_back("sinusoidal/" + std::string(layout));
  for (const std::string_view layout : rope_layout_names()) expected.push_back("rope/" + std::string(layout));
  for (const std::string& name : expected) EXPECT_TRUE(seen.contains(name)) << "no oracle model for " << name;
}

double max_abs_diff(std::span<const float> got, const std::vector<double>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]));
  return worst;
}

TEST(Parity, EveryOracleModelMatchesPyTorch) {
  const std::vector<std::string> names = model_names();
  ASSERT_GE(names.size(), 40u) << "the oracle wrote too few models";
  // The largest deviations seen, reported so that the 1e-4 tolerance can be judged.
  double worst_logprob = 0, worst_encoder = 0;
  std::string worst_model;
  std::size_t tokens = 0;
  for (const std::string& name : names) {
    SCOPED_TRACE("model " + name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const Transformer& t = model->transformer();
    const nlohmann::json reference = read_json(parity_dir() / name / "reference.json");
    ASSERT_FALSE(reference.at("cases").empty());
    for (const nlohmann::json& c : reference.at("cases")) {
      const auto source = c.at("source_ids").get<std::vector<int>>();
      const auto target = c.at("target_ids").get<std::vector<int>>();
      SCOPED_TRACE("source " + c.at("source_ids").dump());

      const auto want_logprobs = c.at("token_logprobs").get<std::vector<double>>();
      const std::vector<float> got_logprobs = score_target(t, source, target);
      reference::expect_close(got_logprobs, want_logprobs, 1e-4, 0.0);
      if (const double e = max_abs_diff(got_logprobs, want_logprobs); e > worst_logprob) {
        worst_logprob = e;
        worst_model = name + " " + c.at("source_ids").dump() + " -> " + c.at("target_ids").dump();
      }
      tokens += got_logprobs.size();

      if (c.contains("encoder_output")) {
        const auto rows = c.at("encoder_output").get<std::vector<std::vector<double>>>();
        const Matrix got = encode(t, source);
        ASSERT_EQ(static_cast<std::size_t>(got.rows()), rows.size());
        for (std::size_t r = 0; r < rows.size(); ++r) {
          reference::expect_close(got.row(static_cast<Index>(r)), rows[r], 1e-4, 0.0);
          worst_encoder = std::max(worst_encoder, max_abs_diff(got.row(static_cast<Index>(r)), rows[r]));
        }
      }

      const Hypothesis best = testing_support::greedy(t, source, c.at("greedy_max_length").get<Index>());
      EXPECT_EQ(best.ids, c.at("greedy_ids").get<std::vector<int>>());
    }
  }
  RecordProperty("worst_logprob_error", std::to_string(worst_logprob));
  RecordProperty("worst_encoder_error", std::to_string(worst_encoder));
  std::cout << "[ parity ] " << names.size() << " models, " << tokens
            << " scored tokens: worst |log-prob error| " << worst_logprob << " (" << worst_model
            << "), worst |encoder output error| " << worst_encoder << '\n';
}

TEST(Parity, BatchesMatchPyTorchBatches) {
  std::size_t batches = 0;
  for (const std::string& name : model_names()) {
    SCOPED_TRACE("model " + name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const Transformer& t = model->transformer();
    const nlohmann::json batch = read_json(parity_dir() / name / "reference.json").at("batch");
    const auto sources = batch.at("sources").get<std::vector<std::vector<int>>>();
    const auto targets = batch.at("targets").get<std::vector<std::vector<int>>>();
    const auto want_logprobs = batch.at("token_logprobs").get<std::vector<std::vector<double>>>();
    const auto want_ids = batch.at("greedy_ids").get<std::vector<std::vector<int>>>();

    const std::vector<Score> scored = score_batch(t, sources, targets);
    DecodingOptions greedy;
    greedy.max_length = batch.at("greedy_max_length").get<Index>();
    const std::vector<DecodeResult> decoded = decode_batch(t, sources, greedy);
    ASSERT_EQ(scored.size(), sources.size());
    ASSERT_EQ(decoded.size(), sources.size());
    for (std::size_t i = 0; i < sources.size(); ++i) {
      SCOPED_TRACE("batch entry " + std::to_string(i));
      ASSERT_TRUE(scored[i].ok()) << scored[i].error;
      reference::expect_close(scored[i].token_logprobs, want_logprobs[i], 1e-4, 0.0);
      ASSERT_TRUE(decoded[i].ok()) << decoded[i].error;
      EXPECT_EQ(decoded[i].hypotheses.front().ids, want_ids[i]);
    }
    ++batches;
  }
  EXPECT_GE(batches, 40u);
}

TEST(Parity, BeamSearchMatchesTheOraclesBeamSearch) {
  std::size_t cases = 0;
  for (const std::string& name : model_names()) {
    SCOPED_TRACE("model " + name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const nlohmann::json reference = read_json(parity_dir() / name / "reference.json");
    for (const nlohmann::json& c : reference.at("beam")) {
      SCOPED_TRACE("beam case " + c.dump().substr(0, 120));
      const auto source = c.at("source_ids").get<std::vector<int>>();
      testing_support::expect_oracle_hypotheses(
          decode(model->transformer(), source, testing_support::beam_case_options(c)), c.at("hypotheses"));
      ++cases;
    }
  }
  EXPECT_GE(cases, 120u);
}

}  // namespace
}  // namespace ordo
