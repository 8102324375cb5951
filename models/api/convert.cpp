// The public options and results <-> the engine's: field by field, so that either side
// can change its layout without the other (tests/test_api_options.cpp checks that the
// defaults agree).
#include "models/api/internal.h"

namespace ordo::api::detail {

ordo::DecodingOptions to_engine(const DecodingOptions& options) {
  ordo::DecodingOptions engine;
  engine.beam_size = options.beam_size;
  engine.n_best = options.n_best;
  engine.length_penalty = options.length_penalty;
  engine.max_length = options.max_length;
  engine.min_length = options.min_length;
  engine.no_repeat_ngram_size = options.no_repeat_ngram_size;
  engine.repetition_penalty = options.repetition_penalty;
  engine.sample = options.sample;
  engine.temperature = options.temperature;
  engine.top_k = options.top_k;
  engine.top_p = options.top_p;
  engine.seed = options.seed;
  return engine;
}

ordo::TranslatorOptions to_engine(const TranslatorOptions& options) {
  ordo::TranslatorOptions engine;
  engine.decoding = to_engine(options.decoding);
  engine.batch_size = options.batch_size;
  engine.max_input_tokens = options.max_input_tokens;
  engine.truncate = options.truncate;
  return engine;
}

ordo::GeneratorOptions to_engine(const GeneratorOptions& options) {
  ordo::GeneratorOptions engine;
  engine.decoding = to_engine(options.decoding);
  engine.batch_size = options.batch_size;
  engine.add_bos = options.add_bos;
  engine.max_input_tokens = options.max_input_tokens;
  engine.truncate = options.truncate;
  return engine;
}

Hypothesis to_public(const ordo::TranslatedHypothesis& hypothesis) {
  return {hypothesis.text,  hypothesis.ids,
          hypothesis.token_logprobs, hypothesis.score,
          hypothesis.normalized_score, hypothesis.finished};
}

namespace {
std::vector<Hypothesis> to_public(const std::vector<ordo::TranslatedHypothesis>& hypotheses) {
  std::vector<Hypothesis> result;
  result.reserve(hypotheses.size());
  for (const auto& h : hypotheses) result.push_back(detail::to_public(h));
  return result;
}
}  // namespace

Translation to_public(ordo::Translation translation) {
  Translation result;
  result.source = std::move(translation.source);
  result.source_ids = std::move(translation.source_ids);
  result.hypotheses = to_public(translation.hypotheses);
  result.error = std::move(translation.error);
  result.truncated = translation.truncated;
  return result;
}

Generation to_public(ordo::Generation generation) {
  Generation result;
  result.prompt = std::move(generation.prompt);
  result.prompt_ids = std::move(generation.prompt_ids);
  result.source = std::move(generation.source);
  result.source_ids = std::move(generation.source_ids);
  result.hypotheses = to_public(generation.hypotheses);
  result.error = std::move(generation.error);
  result.truncated = generation.truncated;
  return result;
}

Score to_public(ordo::Scored scored) {
  Score result;
  result.ids = std::move(scored.target_ids);
  result.token_logprobs = std::move(scored.token_logprobs);
  result.logprob = scored.score;
  result.truncated = scored.truncated;
  return result;
}

}  // namespace ordo::api::detail
