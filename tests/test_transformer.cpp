// The encoder-decoder as a whole, on small random models: the KV cache, masks and
// position schemes must not change what is computed, only how.
//
// Oracle: the same model run another way (all at once vs step by step, padded vs not,
// permuted vs not). The numbers themselves are checked against PyTorch in test_parity.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/decode_inputs.h"
#include "engine/score.h"
#include "engine/search.h"
#include "tests/greedy.h"
#include "models/loaded_model.h"
#include "tests/model_factory.h"
#include "tests/reference.h"

namespace ordo {
namespace {

using testing_support::temp_dir;
using testing_support::tiny_config;
using testing_support::write_random_model;

std::shared_ptr<const LoadedModel> random_model(nlohmann::json config, unsigned seed = 3) {
  const auto dir = temp_dir("transformer");
  write_random_model(dir, config, seed);
  return LoadedModel::load(dir);
}

nlohmann::json with(nlohmann::json config, const nlohmann::json& changes) {
  config.update(changes);
  return config;
}

// Every scheme config.json accepts (models/config.h: a new one is covered the day it is
// added) with its defaults, then variants that reach other code: layouts, offsets,
// pre-norm, BART's layernorm_embedding, few T5 buckets.
std::vector<nlohmann::json> every_scheme() {
  std::vector<nlohmann::json> schemes;
  for (const std::string_view name : position_encoding_names())
    schemes.push_back({{"position_encoding", std::string(name)}});
  const std::vector<nlohmann::json> variants = {
      {{"position_encoding", "sinusoidal"}, {"sinusoidal_layout", "split"}, {"position_offset", 1}},
      {{"position_encoding", "learned"}, {"position_offset", 2}},
      {{"position_encoding", "rope"}, {"rope_layout", "interleaved"}, {"position_offset", 3}},
      {{"position_encoding", "sinusoidal"}, {"normalize_before", true}, {"layernorm_embedding", true}},
      {{"position_encoding", "alibi"}, {"normalize_before", true}, {"position_offset", 2}},
      // Few buckets and a short max_distance, so that these short sequences reach the
      // logarithmic buckets and the last one.
      {{"position_encoding", "t5_relative"}, {"relative_attention_num_buckets", 8}, {"relative_attention_max_distance", 6}},
      {{"position_encoding", "t5_relative"}, {"normalize_before", true}},
  };
  schemes.insert(schemes.end(), variants.begin(), variants.end());
  return schemes;
}
const std::vector<nlohmann::json> kSchemes = every_scheme();

double max_abs_diff(ConstMatrixRef a, ConstMatrixRef b) {
  double worst = 0;
  for (Index r = 0; r < a.rows(); ++r)
    for (Index c = 0; c < a.cols(); ++c)
      worst = std::max(worst, std::abs(static_cast<double>(a(r, c)) - b(r, c)));
  return worst;
}

// Feeding the target one token at a time through the KV cache gives the logits of
// feeding it all at once. Tolerance 1e-5: the same float math, blocked differently.
TEST(Transformer, IncrementalDecodingMatchesAllAtOnce) {
  for (const auto& scheme : kSchemes) {
    SCOPED_TRACE(scheme.dump());
    const auto model = random_model(with(tiny_config(), scheme));
    const Transformer& t = model->transformer();
    const std::vector<int> source = {5, 9, 3, 17, 1};
    const std::vector<int> target = {0, 4, 8, 15, 16, 2, 22};

    const std::vector<std::vector<int>> sources{source};
    const EncodedBatch memory = encode_batch(t, sources);
    const std::vector<Index> source_of{0};
    const std::vector<Index> lengths{static_cast<Index>(target.size())};

    DecoderState all_state;
    t.decoder.start(all_state, memory, source_of, 1, static_cast<Index>(target.size()));
    Matrix all;
    t.decoder.feed(all_state, target, static_cast<Index>(target.size()), lengths, all);

    DecoderState step_state;
    t.decoder.start(step_state, memory, source_of, 1, static_cast<Index>(target.size()));
    Matrix one;
    for (std::size_t i = 0; i < target.size(); ++i) {
      t.decoder.step(step_state, std::span<const int>(&target[i], 1), one);
      reference::expect_close(one.view(), all.view().row_block(static_cast<Index>(i), 1), 1e-5, 1e-5);
    }
  }
}

// Padding keys are invisible: a source padded in a batch beside a longer one encodes
// (and decodes) exactly like the source alone. Tolerance 1e-5 as above.
TEST(Transformer, PaddingInABatchIsInvisible) {
  for (const auto& scheme : kSchemes) {
    SCOPED_TRACE(scheme.dump());
    const auto model = random_model(with(tiny_config(), scheme));
    const Transformer& t = model->transformer();
    const std::vector<int> source = {5, 9, 3, 17, 1};
    const std::vector<std::vector<int>> alone{source};
    const std::vector<std::vector<int>> batch{{4, 4, 6, 7, 8, 9, 10, 1}, source};
    const EncodedBatch plain = encode_batch(t, alone);
    const EncodedBatch padded = encode_batch(t, batch);
    ASSERT_EQ(padded.rows_per_source, 8);
    reference::expect_close(padded.source(1), plain.source(0), 1e-5, 1e-5);

    const std::vector<int> target = {0, 4, 8};
    const std::vector<Index> lengths{3};
    DecoderState a, b;
    Matrix logits_plain, logits_padded;
    t.decoder.start(a, plain, std::vector<Index>{0}, 1, 3);
    t.decoder.feed(a, target, 3, lengths, logits_plain);
    t.decoder.start(b, padded, std::vector<Index>{1}, 1, 3);
    t.decoder.feed(b, target, 3, lengths, logits_padded);
    reference::expect_close(logits_padded.view(), logits_plain.view(), 1e-5, 1e-5);
  }
}

// With position_encoding none the encoder is permutation-equivariant: permuting the
// source permutes the output rows (up to float summation order: 1e-5). Every other
// scheme breaks that by far more (> 1e-2 somewhere).
TEST(Transformer, OnlyNoPositionsIsPermutationEquivariant) {
  const std::vector<int> source = {5, 9, 3, 17, 11, 1};
  const std::vector<int> order = {3, 0, 5, 1, 4, 2};
  std::vector<int> permuted;
  for (int i : order) permuted.push_back(source[static_cast<std::size_t>(i)]);

  for (const auto& scheme : kSchemes) {
    SCOPED_TRACE(scheme.dump());
    const auto model = random_model(with(tiny_config(), scheme));
    const Matrix out = encode(model->transformer(), source);
    const Matrix out_permuted = encode(model->transformer(), permuted);
    Matrix reordered(out.rows(), out.cols());
    for (std::size_t r = 0; r < order.size(); ++r)
      std::copy_n(out.row(order[r]).data(), out.cols(), reordered.row(static_cast<Index>(r)).data());

    const double diff = max_abs_diff(out_permuted, reordered);
    if (scheme["position_encoding"] == "none")
      EXPECT_LT(diff, 1e-5);
    else
      EXPECT_GT(diff, 1e-2);
  }
}

// Greedy search's own log-probabilities (computed through the KV cache, one step at a
// time) agree with teacher forcing of its output. Oracle: one pass over decoder_start +
// greedy's ids, all at once, no cache; its logits at step i, log-softmaxed in double,
// must have greedy's token i as their argmax and give it greedy's log-probability.
// Tolerance 1e-4 per token.
TEST(Transformer, GreedyScoresMatchTeacherForcing) {
  for (const auto& scheme : kSchemes) {
    SCOPED_TRACE(scheme.dump());
    const auto model = random_model(with(tiny_config(), scheme));
    const Transformer& t = model->transformer();
    const std::vector<int> source = {7, 2, 13, 1};
    const Hypothesis best = testing_support::greedy(t, source, 12);
    ASSERT_FALSE(best.ids.empty());
    EXPECT_LE(best.ids.size(), 12u);
    ASSERT_EQ(best.token_logprobs.size(), best.ids.size());

    std::vector<int> forced{t.tokens.decoder_start};
    forced.insert(forced.end(), best.ids.begin(), best.ids.end() - 1);
    const Index steps = static_cast<Index>(forced.size());
    const std::vector<std::vector<int>> sources{source};
    const EncodedBatch memory = encode_batch(t, sources);
    const std::vector<Index> source_of{0}, lengths{steps};
    DecoderState state;
    t.decoder.start(state, memory, source_of, 1, steps);
    Matrix logits;
    t.decoder.feed(state, forced, steps, lengths, logits);
    ASSERT_EQ(logits.rows(), steps);

    double total = 0;
    for (Index i = 0; i < steps; ++i) {
      const auto row = logits.row(i);
      const auto top = std::max_element(row.begin(), row.end());
      double sum = 0;
      for (const float v : row) sum += std::exp(static_cast<double>(v) - *top);
      const int chosen = best.ids[static_cast<std::size_t>(i)];
      const double logprob = row[static_cast<std::size_t>(chosen)] - *top - std::log(sum);
      EXPECT_EQ(top - row.begin(), chosen) << "step " << i << ": greedy chose a token that is not the argmax";
      EXPECT_NEAR(logprob, best.token_logprobs[static_cast<std::size_t>(i)], 1e-4) << "step " << i;
      total += logprob;
    }
    EXPECT_NEAR(best.score, total, 1e-3);
    // And the engine's own teacher-forced scorer agrees.
    const std::vector<float> scored = score_target(t, source, best.ids);
    ASSERT_EQ(scored.size(), best.token_logprobs.size());
    for (std::size_t i = 0; i < scored.size(); ++i) EXPECT_NEAR(scored[i], best.token_logprobs[i], 1e-4) << i;
  }
}

TEST(Transformer, MaxLengthIsValidatedAgainstLearnedPositions) {
  const auto model = random_model(with(tiny_config(), {{"position_encoding", "learned"}}));
  const std::vector<int> source = {7, 2, 13, 1};
  const std::string message = reference::error_message(
      [&] { testing_support::greedy(model->transformer(), source, 41); });
  EXPECT_NE(message.find("max_position_embeddings=40"), std::string::npos) << message;
  // Automatic length is capped at the table, never past it.
  const Hypothesis capped = testing_support::greedy(model->transformer(), std::vector<int>(30, 5));
  EXPECT_LE(capped.ids.size(), 40u);
  // A source longer than the table is a clear error, not a wrap-around.
  const std::string too_long = reference::error_message(
      [&] { encode(model->transformer(), std::vector<int>(41, 5)); });
  EXPECT_NE(too_long.find("max_position_embeddings"), std::string::npos) << too_long;
}

TEST(Transformer, BadIdsAndEmptyInputsAreErrors) {
  const auto model = random_model(tiny_config());
  const Transformer& t = model->transformer();
  EXPECT_NE(reference::error_message([&] { encode(t, std::vector<int>{}); }).find("empty"), std::string::npos);
  EXPECT_NE(reference::error_message([&] { encode(t, std::vector<int>{3, 23}); }).find("id 23"),
            std::string::npos);
  EXPECT_NE(reference::error_message([&] { encode(t, std::vector<int>{-1}); }).find("id -1"),
            std::string::npos);
  EXPECT_NE(reference::error_message([&] { score_target(t, std::vector<int>{3}, std::vector<int>{99}); })
                .find("id 99"),
            std::string::npos);
}

// Whatever the positions allow, a source or target beyond kMaxSequenceLength is refused
// before any [T, T] score matrix is allocated.
TEST(Transformer, OverLongSequencesAreRefused) {
  const auto model = random_model(tiny_config());  // sinusoidal: no table limit
  const std::vector<int> source(kMaxSequenceLength + 1, 5);
  EXPECT_NE(reference::error_message([&] { encode(model->transformer(), source); })
                .find("more than ordo's limit of 4096"),
            std::string::npos);
  EXPECT_NE(reference::error_message([&] {
              testing_support::greedy(model->transformer(), std::vector<int>{5, 1}, kMaxSequenceLength + 1);
            }).find("max_length: 4097 is more than ordo's limit of 4096"),
            std::string::npos);
}

// NaN in the activations must surface as an error, not as a translation made of
// argmax(NaN). Non-finite weights are refused at load (test_hostile), so the NaN is
// made by overflow from finite ones: in a pre-norm stack nothing normalizes the
// residual stream, so two feed-forward biases of 3e38 on the same dimension add up to
// infinity, and the final layer norm's infinity minus infinity is NaN.
TEST(Transformer, NonFiniteLogitsAreReported) {
  const auto dir = temp_dir("nan");
  auto config = tiny_config();
  config["normalize_before"] = true;
  write_random_model(dir, config, 3, [](std::vector<NamedTensor>& tensors) {
    for (NamedTensor& t : tensors)
      if (t.name == "model.decoder.layers.0.fc2.bias" || t.name == "model.decoder.layers.1.fc2.bias") t.values[0] = 3e38f;
  });
  const auto model = LoadedModel::load(dir);
  const std::string message = reference::error_message(
      [&] { testing_support::greedy(model->transformer(), std::vector<int>{5, 1}); });
  EXPECT_NE(message.find("non-finite logits at step 0"), std::string::npos) << message;
  EXPECT_NE(reference::error_message(
                [&] { score_target(model->transformer(), std::vector<int>{5, 1}, std::vector<int>{3, 1}); })
                .find("non-finite"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

// -infinity everywhere is as broken as NaN: argmax would silently pick token 0. Made
// from finite weights: the last layer norm outputs 1 in every dimension (weight 0,
// bias 1) and every weight of an untied output projection is -3e38, so every logit
// overflows to -infinity.
TEST(Transformer, AllImpossibleTokensAreReported) {
  const auto dir = temp_dir("neginf");
  auto config = tiny_config();
  config["tie_word_embeddings"] = false;
  write_random_model(dir, config, 3, [](std::vector<NamedTensor>& tensors) {
    for (NamedTensor& t : tensors) {
      if (t.name == "lm_head.weight") std::fill(t.values.begin(), t.values.end(), -3e38f);
      if (t.name == "model.decoder.layers.1.final_layer_norm.weight") std::fill(t.values.begin(), t.values.end(), 0.0f);
      if (t.name == "model.decoder.layers.1.final_layer_norm.bias") std::fill(t.values.begin(), t.values.end(), 1.0f);
    }
  });
  const auto model = LoadedModel::load(dir);
  EXPECT_NE(reference::error_message([&] { testing_support::greedy(model->transformer(), std::vector<int>{5, 1}); })
                .find("every token has probability 0 at step 0"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ordo
