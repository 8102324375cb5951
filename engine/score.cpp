#include "engine/score.h"

#include "engine/decode_inputs.h"
#include "engine/error.h"
#include "engine/logits_processor.h"

namespace ordo {

std::vector<Score> score_batch(const Transformer& model, std::span<const std::vector<int>> sources,
                               std::span<const std::vector<int>> targets) {
  DecodeWorkspace workspace;
  return score_batch(model, sources, targets, workspace);
}

std::vector<Score> score_batch(const Transformer& model, std::span<const std::vector<int>> sources,
                               std::span<const std::vector<int>> targets, DecodeWorkspace& workspace) {
  const bool decoder_only = model.decoder_only();
  if (decoder_only && !sources.empty())
    throw Error("score", "this model is decoder-only: it scores a sequence on its own, without sources");
  if (!decoder_only && sources.size() != targets.size())
    throw Error("score_batch", std::to_string(sources.size()) + " sources for " + std::to_string(targets.size()) + " targets");
  // The decoder reads [decoder_start, target[0..n-2]] and predicts target[0..n-1]; a
  // decoder-only model reads target[0..n-2] and predicts target[1..n-1].
  const std::size_t skipped = decoder_only ? 1 : 0;  // leading target tokens not predicted
  std::vector<Score> results(targets.size());
  std::vector<std::vector<int>> valid_sources;
  std::vector<const std::vector<int>*> valid_targets;
  std::vector<std::size_t> origin;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    // The ids scored, whether or not scoring succeeds: the caller's input, named.
    if (targets[i].size() > skipped) results[i].ids.assign(targets[i].begin() + static_cast<std::ptrdiff_t>(skipped), targets[i].end());
    try {
      if (!decoder_only) check_source(model, sources[i]);
      check_ids(targets[i], model.decoder.vocab_size(), "target");
      if (decoder_only && targets[i].size() < 2)
        throw Error("target", "has " + std::to_string(targets[i].size()) +
                                  " token; a decoder-only model scores each token after the first",
                    "give at least two tokens");
      model.decoder.check_length(static_cast<Index>(targets[i].size()));  // the rows fed
    } catch (const Error& e) {
      results[i].error = e.what();
      continue;
    }
    if (!decoder_only) valid_sources.push_back(sources[i]);
    valid_targets.push_back(&targets[i]);
    origin.push_back(i);
  }
  if (valid_targets.empty()) return results;

  // All targets at once, padded to the longest, causally masked. Each feeds as many rows
  // as it has tokens, as Hugging Face scores a text (one forward over all of it): an
  // encoder-decoder's [decoder_start] + target[:-1], a decoder-only model's whole text,
  // whose last row predicts nothing but makes the pass as long as the text, which
  // dynamic RoPE scaling rotates by (engine/rope_scaling.h).
  const Index count = static_cast<Index>(valid_targets.size());
  const Index width = longest(valid_targets, [&](const std::vector<int>* t) { return static_cast<Index>(t->size()); });
  std::vector<int> inputs(static_cast<std::size_t>(count * width), model.tokens.pad);
  std::vector<Index> lengths;
  for (Index b = 0; b < count; ++b) {
    const auto& target = *valid_targets[static_cast<std::size_t>(b)];
    auto at = inputs.begin() + b * width;
    if (!decoder_only) *at++ = model.tokens.decoder_start;
    std::copy(target.begin(), decoder_only ? target.end() : target.end() - 1, at);
    lengths.push_back(static_cast<Index>(target.size()));
  }
  DecodeWorkspace::Buffers& buffers = workspace.buffers();
  start_decoder(model, valid_sources, count, buffers, count, width);
  Matrix& logits = buffers.logits;
  model.decoder.feed(buffers.state, inputs, width, lengths, logits);

  const DecodingOptions plain;  // no constraints: the model's own distribution
  LogitsProcessor processor(plain, eos_ids(model.tokens), model.decoder.vocab_size());
  for (Index b = 0; b < count; ++b) {
    const auto& target = *valid_targets[static_cast<std::size_t>(b)];
    Score& result = results[origin[static_cast<std::size_t>(b)]];
    try {
      for (std::size_t t = skipped; t < target.size(); ++t) {
        const std::span<float> row = logits.row(b * width + static_cast<Index>(t - skipped));
        processor.process(row, {}, static_cast<Index>(t));
        result.token_logprobs.push_back(row[static_cast<std::size_t>(target[t])]);
        result.logprob += result.token_logprobs.back();
      }
    } catch (const Error& e) {
      result.token_logprobs.clear();
      result.logprob = 0.0;
      result.error = e.what();
    }
  }
  return results;
}

std::vector<float> score_target(const Transformer& model, std::span<const int> source, std::span<const int> target) {
  if (model.decoder_only() && !source.empty())
    throw Error("score", "this model is decoder-only: it scores a sequence on its own, without a source");
  const auto sources = model.decoder_only() ? std::vector<std::vector<int>>{} : batch_of_one(source);
  Score result = std::move(score_batch(model, sources, batch_of_one(target)).front());
  if (!result.ok()) throw Error(result.error);
  return std::move(result.token_logprobs);
}

}  // namespace ordo
