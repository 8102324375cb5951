#include "models/translator.h"

#include <algorithm>

#include "engine/error.h"
#include "tokenizer/input_text.h"

namespace ordo {

void TranslatorOptions::validate() const {
  decoding.validate();
  if (batch_size < 1) throw OptionError("batch_size", "must be at least 1, got " + std::to_string(batch_size));
  if (batch_size > 65536) throw OptionError("batch_size", "must be at most 65536, got " + std::to_string(batch_size));
  check_max_input_tokens(max_input_tokens);
}

void check_max_input_tokens(Index max_input_tokens) {
  if (max_input_tokens < 0 || max_input_tokens == 1)
    throw OptionError("max_input_tokens", "must be 0 (the model's limit) or at least 2 (a token and the eos or bos "
                                          "ordo adds), got " + std::to_string(max_input_tokens));
}

void check_max_input_tokens(Index max_input_tokens, Index model_limit, const std::string& what) {
  if (max_input_tokens > model_limit)
    throw OptionError("max_input_tokens", std::to_string(max_input_tokens) + " is more than this model reads: " +
                                              std::to_string(model_limit) + " tokens per " + what +
                                              " (0: that limit)");
}

const TranslatedHypothesis& Translation::best() const {
  if (!ok()) throw Error(error);
  if (hypotheses.empty()) throw Error("translation", "has no hypothesis");
  return hypotheses.front();
}

Translator::Translator(std::shared_ptr<const Model> model, TranslatorOptions options)
    : model_(std::move(model)), options_(std::move(options)) {
  if (!model_) throw Error("translator", "no model given");
  if (model_->transformer().decoder_only())
    throw Error(model_->directory().string(), "is a decoder-only model: it continues text rather than translating it",
                "use ordo generate (ordo::Generator)");
  options_.validate();
  check_max_input_tokens(options_.max_input_tokens, model_->max_source_tokens(), "source");
}

Translation Translator::translate(std::string_view text) const {
  if (is_blank(text)) throw Error("input text", "is empty", "give a sentence to translate");
  const std::vector<std::string> one{std::string(text)};
  Translation result = std::move(translate_batch(one).front());
  if (!result.ok()) throw Error(result.error);
  return result;
}

std::vector<Translation> Translator::translate_batch(std::span<const std::string> lines,
                                                     std::uint64_t first_stream) const {
  std::vector<Translation> requests(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    Translation& r = requests[i];
    r.source = lines[i];
    if (is_blank(r.source)) {  // nothing to translate: an empty translation, not an error
      r.hypotheses.emplace_back().finished = true;
      continue;
    }
    try {
      Model::TokenizedInput source = model_->tokenize_source(r.source, input_limit());
      r.source_ids = std::move(source.ids);
      r.truncated = source.truncated;
    } catch (const Error& e) {
      r.error = e.what();
    }
  }
  return decode_all(std::move(requests), first_stream);
}

std::vector<Translation> Translator::translate_ids_batch(std::span<const std::vector<int>> sources,
                                                         std::uint64_t first_stream) const {
  std::vector<Translation> requests(sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    requests[i].source_ids = sources[i];
    if (model_->has_tokenizer()) {
      try {
        requests[i].source = model_->detokenize_source(sources[i]);
      } catch (const Error& e) {
        requests[i].error = e.what();
      }
    }
  }
  return decode_all(std::move(requests), first_stream);
}

std::vector<Translation> Translator::decode_all(std::vector<Translation> requests,
                                                std::uint64_t first_stream) const {
  // The sources still to decode; the rest failed to tokenize or are blank.
  // Each keeps its sampling stream, numbered by input line.
  std::vector<std::size_t> pending;
  std::vector<DecodeRequest> decode;
  std::vector<std::uint64_t> streams;
  for (std::size_t i = 0; i < requests.size(); ++i)
    if (requests[i].ok() && requests[i].hypotheses.empty()) {
      pending.push_back(i);
      decode.push_back({requests[i].source_ids, {}});
      streams.push_back(first_stream + i);
    }
  WorkspacePool::Lease workspace = workspaces_->borrow();
  std::vector<DecodeResult> decoded;
  if (!decode.empty())
    decoded = decode_many(model_->transformer(), decode, options_.decoding, options_.batch_size, streams, *workspace);
  for (std::size_t k = 0; k < pending.size(); ++k) {
    Translation& r = requests[pending[k]];
    DecodeResult& d = decoded[k];
    if (!d.ok()) {
      r.error = std::move(d.error);
      continue;
    }
    try {
      for (Hypothesis& h : d.hypotheses) {
        TranslatedHypothesis t{std::move(h), {}};
        if (model_->has_tokenizer()) t.text = model_->detokenize_target(t.ids);
        r.hypotheses.push_back(std::move(t));
      }
    } catch (const Error& e) {  // an id the tokenizer lacks (a model vocabulary larger than it): this source fails
      r.hypotheses.clear();
      r.error = e.what();
    }
  }
  return requests;
}

Scored Translator::score(std::string_view source, std::string_view target) const {
  // Errors name the side at fault: "target: input text: is empty ...".
  const auto tokenized = [](const char* side, auto&& tokenize) {
    try {
      return tokenize();
    } catch (const Error& e) {
      throw Error(side, e.what());
    }
  };
  const Model::TokenizedInput cut = tokenized("source", [&] { return model_->tokenize_source(source, input_limit()); });
  const std::vector<std::vector<int>> sources{cut.ids};
  const std::vector<std::vector<int>> targets{
      tokenized("target", [&] { return model_->tokenize_target(target, options_.max_input_tokens); })};
  Scored result = std::move(score_ids_batch(sources, targets).front());
  if (!result.ok()) throw Error(result.error);
  result.truncated = cut.truncated;
  return result;
}

std::vector<Scored> Translator::score_ids_batch(std::span<const std::vector<int>> sources,
                                                std::span<const std::vector<int>> targets) const {
  if (sources.size() != targets.size())
    throw Error("score", std::to_string(sources.size()) + " sources for " + std::to_string(targets.size()) + " targets");
  std::vector<Scored> results(targets.size());
  const auto batch = static_cast<std::size_t>(options_.batch_size);
  WorkspacePool::Lease workspace = workspaces_->borrow();
  for (std::size_t first = 0; first < sources.size(); first += batch) {
    const std::size_t count = std::min(batch, sources.size() - first);
    std::vector<ScoreResult> scored = score_batch(model_->transformer(), sources.subspan(first, count),
                                                  targets.subspan(first, count), *workspace);
    for (std::size_t k = 0; k < count; ++k) {
      Scored& r = results[first + k];
      r.target_ids = targets[first + k];
      r.token_logprobs = std::move(scored[k].token_logprobs);
      r.score = scored[k].score;
      r.error = std::move(scored[k].error);
    }
  }
  return results;
}

Matrix Translator::encode(std::string_view text) const {
  return ordo::encode(model_->transformer(), model_->tokenize_source(text));
}

}  // namespace ordo
