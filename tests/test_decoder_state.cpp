// DecoderState::reorder: after a beam step, new sequence i must continue old sequence
// parents[i] exactly, whether it took over the parent's slot or got a copy of its rows.
// Oracle: a fresh single-sequence state fed the same history from scratch.
// Tolerance 1e-5: the same float math, batched differently.
#include <gtest/gtest.h>

#include <numeric>

#include "engine/decode_inputs.h"
#include "engine/search.h"
#include "models/loaded_model.h"
#include "tests/model_factory.h"
#include "tests/reference.h"

namespace ordo {
namespace {

using testing_support::tiny_config;

// Logits of the last of `history` for `source`, computed alone, step by step.
Matrix alone(const Transformer& t, const std::vector<int>& source, const std::vector<int>& history) {
  const std::vector<std::vector<int>> sources{source};
  DecoderState state;
  t.decoder.start(state, encode_batch(t, sources), std::vector<Index>{0}, 1, 16);
  Matrix logits;
  for (const int token : history) t.decoder.step(state, std::span<const int>(&token, 1), logits);
  return logits;
}

TEST(DecoderState, ReorderedSequencesContinueTheirParents) {
  for (const std::string_view scheme : position_encoding_names()) {  // every scheme config.json accepts
    SCOPED_TRACE(scheme);
    const auto dir = testing_support::temp_dir("reorder");
    auto config = tiny_config();
    config["position_encoding"] = std::string(scheme);
    testing_support::write_random_model(dir, config);
    const auto model = LoadedModel::load(dir, nullptr);
    const Transformer& t = model->transformer();

    // Two sources, two sequences each (source_of 0, 0, 1, 1), six slots.
    const std::vector<std::vector<int>> sources = {{5, 9, 3, 1}, {7, 8, 1}};
    DecoderState state;
    t.decoder.start(state, encode_batch(t, sources), std::vector<Index>{0, 0, 1, 1}, 6, 16);
    std::vector<std::vector<int>> histories = {{0}, {0}, {0}, {0}};
    Matrix logits;
    std::vector<int> tokens = {0, 0, 0, 0};
    t.decoder.step(state, tokens, logits);
    // Steps with diverging tokens, then reorders that duplicate, drop and grow.
    const std::vector<std::vector<Index>> plans = {{0, 1, 2, 3}, {1, 1, 0, 3, 3, 2}, {2, 2, 2, 5}, {0, 1, 3}};
    int next = 4;
    for (const auto& parents : plans) {
      tokens.resize(state.sequences());
      for (Index s = 0; s < state.sequences(); ++s) {
        tokens[static_cast<std::size_t>(s)] = next++ % 23;
        histories[static_cast<std::size_t>(s)].push_back(tokens[static_cast<std::size_t>(s)]);
      }
      t.decoder.step(state, tokens, logits);
      for (Index s = 0; s < state.sequences(); ++s) {
        SCOPED_TRACE("sequence " + std::to_string(s));
        const auto& source = sources[static_cast<std::size_t>(state.source_of(s))];
        const Matrix want = alone(t, source, histories[static_cast<std::size_t>(s)]);
        reference::expect_close(logits.view().row_block(s, 1), want.view(), 1e-5, 1e-5);
      }
      std::vector<std::vector<int>> next_histories;
      for (const Index p : parents) next_histories.push_back(histories[static_cast<std::size_t>(p)]);
      histories = next_histories;
      state.reorder(parents);
      ASSERT_EQ(state.sequences(), static_cast<Index>(parents.size()));
    }
    std::filesystem::remove_all(dir);
  }
}

TEST(DecoderState, ReorderRejectsBadParents) {
  const auto dir = testing_support::temp_dir("reorder_bad");
  testing_support::write_random_model(dir, tiny_config());
  const auto model = LoadedModel::load(dir, nullptr);
  const Transformer& t = model->transformer();
  const std::vector<std::vector<int>> sources = {{5, 1}};
  DecoderState state;
  t.decoder.start(state, encode_batch(t, sources), std::vector<Index>{0}, 2, 4);
  EXPECT_NE(reference::error_message([&] { state.reorder(std::vector<Index>{1}); }).find("parent 1"), std::string::npos);
  EXPECT_NE(reference::error_message([&] { state.reorder(std::vector<Index>{0, 0, 0}); }).find("3 sequences"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ordo
