#include "models/generator.h"

#include <algorithm>

#include "engine/error.h"
#include "tokenizer/input_text.h"

namespace ordo {

namespace {

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// The ids up to and including the first eos: what a continuation's text is made of.
std::span<const int> until_eos(const SpecialTokens& tokens, std::span<const int> ids) {
  const auto end = std::find_if(ids.begin(), ids.end(), [&](int id) { return tokens.is_eos(id); });
  return ids.first(static_cast<std::size_t>(end - ids.begin()));
}

// A decoder-only model's prompt (bos first when asked), or an encoder-decoder model's
// forced target prefix, which may be blank (decoder_start plays bos's part).
Model::TokenizedInput prompt_ids(const Model& model, std::string_view prompt, bool add_bos,
                                 const Model::InputLimit& limit) {
  if (model.transformer().decoder_only()) return model.tokenize_prompt(prompt, add_bos, limit);
  if (is_blank(prompt)) return {};
  return model.tokenize_prompt(prompt, false, limit);
}

// An encoder-decoder model continues the translation of one source per prompt; a
// decoder-only model reads none.
void check_sources(const Transformer& model, std::size_t prompts, std::size_t sources) {
  if (model.decoder_only() && sources > 0)
    throw Error("generate", "this model is decoder-only: it continues prompts and reads no source");
  if (!model.decoder_only() && sources != prompts)
    throw Error("generate", "an encoder-decoder model needs one source per prompt; got " + std::to_string(sources) +
                                " for " + std::to_string(prompts));
}

}  // namespace

void GeneratorOptions::validate() const {
  decoding.validate();
  if (batch_size < 1) throw OptionError("batch_size", "must be at least 1, got " + std::to_string(batch_size));
  if (batch_size > 65536) throw OptionError("batch_size", "must be at most 65536, got " + std::to_string(batch_size));
  check_max_input_tokens(max_input_tokens);
}

const TranslatedHypothesis& Generation::best() const {
  if (!ok()) throw Error(error);
  if (hypotheses.empty()) throw Error("generation", "has no hypothesis");
  return hypotheses.front();
}

Generator::Generator(std::shared_ptr<const Model> model, GeneratorOptions options)
    : model_(std::move(model)), options_(std::move(options)) {
  if (!model_) throw Error("generator", "no model given");
  options_.validate();
  check_max_input_tokens(options_.max_input_tokens, model_->max_prompt_tokens(), "prompt");
  if (!model_->transformer().decoder_only())
    check_max_input_tokens(options_.max_input_tokens, model_->max_source_tokens(), "source");
}

std::string Generator::continuation_text(std::span<const int> prompt, std::span<const int> generated) const {
  const SpecialTokens& tokens = model_->transformer().tokens;
  const std::span<const int> kept = until_eos(tokens, generated);
  if (kept.empty()) return "";
  // Decoded in context, so that the space a word piece carries ("▁Hund") shows up
  // between the prompt and the continuation; the prompt's own text is then cut off.
  std::vector<int> all(prompt.begin(), prompt.end());
  all.insert(all.end(), kept.begin(), kept.end());
  const std::string whole = model_->detokenize_target(all);
  const std::string before = model_->detokenize_target(prompt);
  if (whole.starts_with(before)) return whole.substr(before.size());
  return model_->detokenize_target(kept);  // the pieces merged across the boundary
}

Model::InputLimit Generator::prompt_limit() const {
  Model::InputLimit limit = input_limit();
  if (!limit.truncate) return limit;
  // Cutting a prompt to all the positions would leave room for one new token: cut it
  // further, so that max_length new tokens fit (the last one is never fed back).
  const Index wanted = options_.decoding.max_length > 0 ? options_.decoding.max_length : kAutomaticGenerationLength;
  const Index room = model_->max_prompt_tokens() - wanted + 1;
  const Index bound = limit.max_tokens > 0 ? limit.max_tokens : model_->max_prompt_tokens();
  if (room >= 2) limit.max_tokens = std::min(bound, room);
  return limit;
}

Generation Generator::prepare(std::string_view prompt, std::string_view source) const {
  Generation request;
  request.prompt = std::string(prompt);
  request.source = std::string(source);
  if (model_->transformer().decoder_only() && !source.empty())
    throw Error("generate", "this model is decoder-only: it continues a prompt and reads no source");
  try {
    Model::TokenizedInput ids = prompt_ids(*model_, prompt, options_.add_bos, prompt_limit());
    request.prompt_ids = std::move(ids.ids);
    request.truncated = ids.truncated;
    if (!model_->transformer().decoder_only()) {
      ids = model_->tokenize_source(source, input_limit());
      request.source_ids = std::move(ids.ids);
      request.truncated = request.truncated || ids.truncated;
    }
  } catch (const Error& e) {
    request.error = e.what();
  }
  return request;
}

Generation Generator::generate(std::string_view prompt, std::string_view source, const TextCallback& on_text) const {
  return generate(prepare(prompt, source), on_text);
}

Generation Generator::generate(Generation request, const TextCallback& on_text, std::uint64_t stream) const {
  if (!request.ok()) throw Error(request.error);
  const DecodeRequest decode{request.source_ids, request.prompt_ids};
  WorkspacePool::Lease workspace = workspaces_->borrow();
  std::vector<int> streamed;
  std::string shown;
  TokenCallback on_token;
  if (on_text && options_.decoding.beam_size == 1)
    on_token = [&](std::size_t, int token) {
      streamed.push_back(token);
      const std::string decoded = continuation_text(request.prompt_ids, streamed);
      std::string_view text = decoded;
      // A byte piece that begins a character (byte-fallback tokenizers) decodes as
      // U+FFFD until the rest of the character arrives: hold a trailing one back.
      while (text.ends_with(kReplacementCharacter)) text.remove_suffix(kReplacementCharacter.size());
      // Pieces only ever extend the text; print what is new.
      if (text.size() > shown.size() && text.starts_with(shown)) {
        on_text(text.substr(shown.size()));
        shown = text;
      }
    };
  DecodeResult result = std::move(decode_requests(model_->transformer(), std::span(&decode, 1), options_.decoding,
                                                  std::span(&stream, 1), *workspace, on_token)
                                      .front());
  if (!result.ok()) throw Error(result.error);
  for (Hypothesis& h : result.hypotheses) {
    TranslatedHypothesis t{std::move(h), {}};
    t.text = continuation_text(request.prompt_ids, t.ids);
    request.hypotheses.push_back(std::move(t));
  }
  if (on_text && options_.decoding.beam_size > 1) on_text(request.best().text);
  // What was held back (a character that never completed) is part of the text too.
  if (on_text && options_.decoding.beam_size == 1) {
    const std::string& text = request.best().text;
    if (text.size() > shown.size() && text.starts_with(shown)) on_text(std::string_view(text).substr(shown.size()));
  }
  return request;
}

std::vector<Generation> Generator::generate_batch(std::span<const std::string> prompts,
                                                  std::span<const std::string> sources,
                                                  std::uint64_t first_stream) const {
  check_sources(model_->transformer(), prompts.size(), sources.size());
  std::vector<Generation> requests;
  requests.reserve(prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i)
    requests.push_back(prepare(prompts[i], sources.empty() ? std::string_view() : std::string_view(sources[i])));
  return decode_all(std::move(requests), first_stream);
}

std::vector<Generation> Generator::generate_prepared(std::vector<Generation> requests,
                                                     std::uint64_t first_stream) const {
  return decode_all(std::move(requests), first_stream);
}

std::vector<Generation> Generator::generate_ids_batch(std::span<const std::vector<int>> prompts,
                                                      std::span<const std::vector<int>> sources,
                                                      std::uint64_t first_stream) const {
  check_sources(model_->transformer(), prompts.size(), sources.size());
  std::vector<Generation> requests(prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    Generation& r = requests[i];
    r.prompt_ids = prompts[i];
    if (!sources.empty()) r.source_ids = sources[i];
    if (!model_->has_tokenizer()) continue;
    try {
      r.prompt = model_->detokenize_target(r.prompt_ids);
      if (!r.source_ids.empty()) r.source = model_->detokenize_source(r.source_ids);
    } catch (const Error&) {
      // Ids the tokenizer cannot spell: the texts stay empty, and the decoder checks
      // the ids against the model's own vocabulary, with a message naming the input.
    }
  }
  return decode_all(std::move(requests), first_stream);
}

Scored Generator::score(std::string_view text) const {
  // bos (when asked), the text, eos: the decoder reads all but eos, which is what a
  // target's limit counts.
  std::vector<int> ids;
  if (options_.add_bos && model_->config().bos_token_id) ids.push_back(*model_->config().bos_token_id);
  const std::vector<int> target = model_->tokenize_target(text, options_.max_input_tokens);
  ids.insert(ids.end(), target.begin(), target.end());
  const std::vector<std::vector<int>> sequences{std::move(ids)};
  Scored result = std::move(score_ids_batch(sequences).front());
  if (!result.ok()) throw Error(result.error);
  return result;
}

std::vector<Scored> Generator::score_ids_batch(std::span<const std::vector<int>> sequences) const {
  if (!model_->transformer().decoder_only())
    throw Error("score", "this is an encoder-decoder model: a target is scored given a source",
                "use ordo::Translator::score, or ordo score --source ... --target ...");
  std::vector<Scored> results(sequences.size());
  WorkspacePool::Lease workspace = workspaces_->borrow();
  const auto batch = static_cast<std::size_t>(options_.batch_size);
  for (std::size_t first = 0; first < sequences.size(); first += batch) {
    const std::size_t count = std::min(batch, sequences.size() - first);
    std::vector<ScoreResult> scored = score_batch(model_->transformer(), {}, sequences.subspan(first, count), *workspace);
    for (std::size_t k = 0; k < count; ++k) {
      Scored& r = results[first + k];
      const std::vector<int>& sequence = sequences[first + k];
      if (!sequence.empty()) r.target_ids.assign(sequence.begin() + 1, sequence.end());
      r.token_logprobs = std::move(scored[k].token_logprobs);
      r.score = scored[k].score;
      r.error = std::move(scored[k].error);
    }
  }
  return results;
}

std::vector<Generation> Generator::decode_all(std::vector<Generation> requests, std::uint64_t first_stream) const {
  std::vector<std::size_t> pending;
  std::vector<DecodeRequest> decode;
  std::vector<std::uint64_t> streams;
  for (std::size_t i = 0; i < requests.size(); ++i)
    if (requests[i].ok() && requests[i].hypotheses.empty()) {
      pending.push_back(i);
      decode.push_back({requests[i].source_ids, requests[i].prompt_ids});
      streams.push_back(first_stream + i);
    }
  if (decode.empty()) return requests;
  WorkspacePool::Lease workspace = workspaces_->borrow();
  std::vector<DecodeResult> decoded =
      decode_many(model_->transformer(), decode, options_.decoding, options_.batch_size, streams, *workspace);
  for (std::size_t k = 0; k < pending.size(); ++k) {
    Generation& r = requests[pending[k]];
    if (!decoded[k].ok()) {
      r.error = std::move(decoded[k].error);
      continue;
    }
    try {
      for (Hypothesis& h : decoded[k].hypotheses) {
        TranslatedHypothesis t{std::move(h), {}};
        if (model_->has_tokenizer()) t.text = continuation_text(r.prompt_ids, t.ids);
        r.hypotheses.push_back(std::move(t));
      }
    } catch (const Error& e) {  // an id the tokenizer lacks (a model vocabulary larger than it)
      r.hypotheses.clear();
      r.error = e.what();
    }
  }
  return requests;
}

}  // namespace ordo
