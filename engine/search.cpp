#include "engine/search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/error.h"
#include "engine/ops.h"

namespace ordo {

namespace {

// Checks ids against a vocabulary before they reach an embedding lookup, so the error
// says which input was at fault.
void check_ids(std::span<const int> ids, Index vocab_size, const char* what) {
  if (ids.empty()) throw Error(what, "is empty", "give at least one token id");
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw Error(what, "id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                            " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
}

// logits [1, V] -> log-probabilities, in place; a NaN or infinity means broken weights
// and is reported rather than decoded into nonsense.
void to_log_probabilities(MatrixRef logits, Index step) {
  ops::log_softmax_rows(logits);
  bool any_possible = false;  // a row of -inf only would make argmax pick token 0
  for (float x : logits.row(0)) {
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity())
      throw Error("decoder", "non-finite logits at step " + std::to_string(step),
                  "the model's weights hold NaN or infinity");
    any_possible |= std::isfinite(x);
  }
  if (!any_possible)
    throw Error("decoder", "every token has probability 0 at step " + std::to_string(step),
                "the model's weights hold -infinity");
}

int argmax(std::span<const float> logits) {
  return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace

Index SearchOptions::resolve_max_length(const Decoder& decoder, Index source_length) const {
  if (max_length < 0)
    throw Error("max_length", "must be >= 0 (0: automatic), got " + std::to_string(max_length));
  if (max_length == 0)
    return std::min({2 * source_length + 10, decoder.max_steps(), kMaxSequenceLength});
  if (max_length > kMaxSequenceLength)
    throw Error("max_length", std::to_string(max_length) + " is more than ordo's limit of " +
                                  std::to_string(kMaxSequenceLength) + " target tokens");
  if (max_length > decoder.max_steps())
    throw Error("max_length", std::to_string(max_length) +
                                  " is beyond the decoder's learned positions (max_position_embeddings=" +
                                  std::to_string(decoder.max_steps()) + ")",
                "use a max length of at most " + std::to_string(decoder.max_steps()));
  return max_length;
}

Matrix encode(const Transformer& model, std::span<const int> source) {
  check_ids(source, model.encoder.embedding().vocab_size(), "source");
  EncoderWorkspace workspace;
  Matrix memory;
  model.encoder.encode(source, {}, workspace, memory);
  return memory;
}

Hypothesis greedy_search(const Transformer& model, std::span<const int> source,
                         const SearchOptions& options) {
  return greedy_decode(model, encode(model, source), options);
}

Hypothesis greedy_decode(const Transformer& model, ConstMatrixRef memory, const SearchOptions& options) {
  const Index max_length = options.resolve_max_length(model.decoder, memory.rows());
  DecoderState state;
  model.decoder.start(state, memory, {}, max_length);

  Hypothesis result;
  result.ids.reserve(static_cast<std::size_t>(max_length));
  result.token_logprobs.reserve(static_cast<std::size_t>(max_length));
  Matrix logits;
  int token = model.tokens.decoder_start;
  while (state.steps() < max_length) {
    model.decoder.step(state, std::span<const int>(&token, 1), logits);
    to_log_probabilities(logits, state.steps() - 1);
    token = argmax(logits.row(0));
    const double logprob = logits(0, token);
    result.ids.push_back(token);
    result.token_logprobs.push_back(static_cast<float>(logprob));
    result.score += logprob;
    if (token == model.tokens.eos) {
      result.finished = true;
      break;
    }
  }
  return result;
}

std::vector<float> score_target(const Transformer& model, std::span<const int> source,
                                std::span<const int> target) {
  check_ids(target, model.decoder.vocab_size(), "target");
  const Matrix memory = encode(model, source);
  const Index length = static_cast<Index>(target.size());
  DecoderState state;
  model.decoder.start(state, memory, {}, length);

  std::vector<int> inputs;
  inputs.reserve(target.size());
  inputs.push_back(model.tokens.decoder_start);
  inputs.insert(inputs.end(), target.begin(), target.end() - 1);
  Matrix logits;
  model.decoder.step(state, inputs, logits);  // all positions at once, causally masked

  std::vector<float> logprobs(target.size());
  for (Index t = 0; t < length; ++t) {
    to_log_probabilities(logits.view().row_block(t, 1), t);
    logprobs[static_cast<std::size_t>(t)] = logits(t, target[static_cast<std::size_t>(t)]);
  }
  return logprobs;
}

}  // namespace ordo
