// ordo::Generator: a prompt in, its continuation out. A decoder-only model continues
// the prompt; an encoder-decoder model continues a forced target prefix (the prompt) of
// the translation of a source. Every option of DecodingOptions applies (beams,
// sampling, constraints).
#include <algorithm>

#include "engine/decode_inputs.h"
#include "engine/decoding_options.h"
#include "engine/error.h"
#include "engine/limits.h"
#include "engine/score.h"
#include "engine/search.h"
#include "models/api/continuation_stream.h"
#include "models/api/internal.h"
#include "engine/input_text.h"

namespace ordo {

namespace {

// A decoder-only model's prompt (bos first when asked), or an encoder-decoder model's
// forced target prefix, which may be blank (decoder_start plays bos's part).
LoadedModel::TokenizedInput prompt_ids(const LoadedModel& model, std::string_view prompt, bool add_bos,
                                       const LoadedModel::InputLimit& limit) {
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

// An encoder-decoder model continues the translation of a source: without one there is
// nothing to continue (the tokenizer would call the blank source "input text: is empty").
void require_source(const LoadedModel& model, std::string_view source) {
  if (!model.transformer().decoder_only() && source.empty())
    throw Error("generate", "this is an encoder-decoder model: it continues the translation of a source, and none "
                            "was given",
                "call generate_detailed(prompt, source) with the sentence to translate (the prompt is then the "
                "start of its translation), or ordo::Translator to translate it whole");
}

LoadedModel::InputLimit input_limit(const GeneratorOptions& options) {
  return {options.max_input_tokens, options.truncate};
}

// The limit on a prompt: input_limit, and with truncate, short enough that max_length
// new tokens still fit. Cutting a prompt to all the positions would leave room for one
// new token; the last one is never fed back.
LoadedModel::InputLimit prompt_limit(const LoadedModel& model, const GeneratorOptions& options) {
  LoadedModel::InputLimit limit = input_limit(options);
  if (!limit.truncate) return limit;
  const Index wanted = options.decoding.max_length > 0 ? options.decoding.max_length : kAutomaticGenerationLength;
  const Index room = model.max_prompt_tokens() - wanted + 1;
  const Index bound = limit.max_tokens > 0 ? limit.max_tokens : model.max_prompt_tokens();
  if (room >= 2) limit.max_tokens = std::min(bound, room);
  return limit;
}

void check_interrupt(const GeneratorOptions& options) {
  if (options.interrupt) options.interrupt();
}

// Throws unless `options` suit `model`: what the constructor and with_options check.
void check_generator(const Model& model, const GeneratorOptions& options) {
  const LoadedModel& loaded = detail::loaded(model);
  options.validate();
  detail::check_max_input_tokens(options.max_input_tokens, loaded.max_prompt_tokens(), "prompt");
  if (!loaded.transformer().decoder_only())
    detail::check_max_input_tokens(options.max_input_tokens, loaded.max_source_tokens(), "source");
}

}  // namespace

std::vector<int> detail::forced_prefix(const Generation& request) { return request.prompt_ids; }

std::string detail::hypothesis_text(const LoadedModel& model, const Generation& request, std::span<const int> ids) {
  return detail::continuation_text(model, request.prompt_ids, ids);
}

void GeneratorOptions::validate() const {
  decoding.validate();
  check_batch_size(batch_size);
  detail::check_max_input_tokens(max_input_tokens);
}

Generator::Generator(const Model& model, const GeneratorOptions& options)
    : impl_(std::make_shared<const Impl>(Impl{model, options})) {
  check_generator(model, options);
}

Generator::Generator(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Generator Generator::with_options(const GeneratorOptions& options) const {
  check_generator(impl_->model, options);
  return Generator(std::make_shared<const Impl>(Impl{impl_->model, options, impl_->workspaces}));
}

std::string Generator::generate(std::string_view prompt, const TextCallback& on_text) const {
  require_source(detail::loaded(impl_->model), {});
  return generate_prepared(prepare(prompt), on_text).best().text;
}

Generation Generator::generate_detailed(std::string_view prompt, std::string_view source) const {
  require_source(detail::loaded(impl_->model), source);
  return generate_prepared(prepare(prompt, source));
}

Generation Generator::prepare(std::string_view prompt, std::string_view source) const {
  const LoadedModel& model = detail::loaded(impl_->model);
  Generation request;
  request.prompt = std::string(prompt);
  request.source = std::string(source);
  if (model.transformer().decoder_only() && !source.empty())
    throw Error("generate", "this model is decoder-only: it continues a prompt and reads no source");
  try {
    LoadedModel::TokenizedInput ids =
        prompt_ids(model, prompt, impl_->options.add_bos, prompt_limit(model, impl_->options));
    request.prompt_ids = std::move(ids.ids);
    request.truncated = ids.truncated;
    if (!model.transformer().decoder_only()) {
      ids = model.tokenize_source(source, input_limit(impl_->options));
      request.source_ids = std::move(ids.ids);
      request.truncated = request.truncated || ids.truncated;
    }
  } catch (const Error& e) {
    request.error = e.what();
  }
  return request;
}

Generation Generator::generate_prepared(Generation request, const TextCallback& on_text, std::uint64_t index) const {
  if (!request.ok()) throw Error(request.error);
  const LoadedModel& model = detail::loaded(impl_->model);
  const DecodingOptions& decoding = impl_->options.decoding;
  const DecodeRequest decode{request.source_ids, request.prompt_ids};
  WorkspacePool::Lease workspace = impl_->workspaces->borrow();
  detail::ContinuationStream stream(model, request.prompt_ids);
  TokenCallback on_token;
  if (on_text && decoding.beam_size == 1)
    on_token = [&](std::size_t, int token, float) {
      const std::string added = stream.add(token, false);
      if (!added.empty()) on_text(added);
    };
  DecodeResult result = std::move(decode_requests(model.transformer(), std::span(&decode, 1), decoding,
                                                  std::span(&index, 1), *workspace, on_token, impl_->options.interrupt)
                                      .front());
  if (!result.ok()) throw Error(result.error);
  for (Hypothesis& h : result.hypotheses) h.text = detail::continuation_text(model, request.prompt_ids, h.ids);
  request.hypotheses = std::move(result.hypotheses);
  if (on_text && decoding.beam_size > 1) on_text(request.best().text);
  // What was held back (a character that never completed) is part of the text too.
  if (on_text && decoding.beam_size == 1) {
    const std::string rest = stream.rest(request.best().text);
    if (!rest.empty()) on_text(rest);
  }
  return request;
}

Generation Generator::generate_streamed(Generation request, const OnToken& on_token, std::uint64_t index) const {
  if (!request.ok()) throw Error(request.error);
  const LoadedModel& model = detail::loaded(impl_->model);
  const Transformer& transformer = model.transformer();
  const DecodingOptions& decoding = impl_->options.decoding;
  const DecodeRequest decode{request.source_ids, request.prompt_ids};
  detail::ContinuationStream stream(model, request.prompt_ids);
  const auto report = [&](int token, float logprob, bool last) {
    const bool eos = transformer.tokens.is_eos(token);
    on_token(GeneratedToken{token, logprob, stream.add(token, last || eos), eos});
  };
  // With one beam each token is final when chosen; the last is eos or the
  // max_length-th, as the search counts them, and that one holds nothing back.
  TokenCallback on_chosen;
  Index length = 0, chosen = 0;
  if (decoding.beam_size == 1) {
    length = resolve_max_length(decoding, transformer.decoder, static_cast<Index>(decode.source.size()),
                                decoder_input_length(transformer, decode));
    on_chosen = [&](std::size_t, int token, float logprob) { report(token, logprob, ++chosen == length); };
  }
  DecodeResult result;
  {  // the workspace goes back before the beams' tokens are reported: on_token may be slow
    WorkspacePool::Lease workspace = impl_->workspaces->borrow();
    result = std::move(decode_requests(transformer, std::span(&decode, 1), decoding, std::span(&index, 1), *workspace,
                                       on_chosen, impl_->options.interrupt)
                           .front());
  }
  if (!result.ok()) throw Error(result.error);
  for (Hypothesis& h : result.hypotheses) h.text = detail::continuation_text(model, request.prompt_ids, h.ids);
  request.hypotheses = std::move(result.hypotheses);
  if (decoding.beam_size > 1) {
    const Hypothesis& best = request.best();
    for (std::size_t t = 0; t < best.ids.size(); ++t)
      report(best.ids[t], best.token_logprobs[t], t + 1 == best.ids.size());
  }
  return request;
}

std::vector<Generation> Generator::generate_prepared_batch(std::vector<Generation> requests,
                                                           std::uint64_t first_index) const {
  return detail::decode_open(*impl_, std::move(requests), first_index);
}

std::vector<Generation> Generator::generate_batch(std::span<const std::string> prompts,
                                                  std::span<const std::string> sources,
                                                  std::uint64_t first_index) const {
  check_sources(detail::loaded(impl_->model).transformer(), prompts.size(), sources.size());
  std::vector<Generation> requests;
  requests.reserve(prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    check_interrupt(impl_->options);
    requests.push_back(prepare(prompts[i], sources.empty() ? std::string_view() : std::string_view(sources[i])));
  }
  return detail::decode_open(*impl_, std::move(requests), first_index);
}

std::vector<Generation> Generator::generate_ids_batch(std::span<const std::vector<int>> prompts,
                                                      std::span<const std::vector<int>> sources,
                                                      std::uint64_t first_index) const {
  const LoadedModel& model = detail::loaded(impl_->model);
  check_sources(model.transformer(), prompts.size(), sources.size());
  std::vector<Generation> requests(prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    Generation& r = requests[i];
    r.prompt_ids = prompts[i];
    if (!sources.empty()) r.source_ids = sources[i];
    if (!model.has_tokenizer()) continue;
    try {
      r.prompt = model.detokenize_target(r.prompt_ids);
      if (!r.source_ids.empty()) r.source = model.detokenize_source(r.source_ids);
    } catch (const Error&) {
      // Ids the tokenizer cannot spell: the texts stay empty, and the decoder checks
      // the ids against the model's own vocabulary, with a message naming the input.
    }
  }
  return detail::decode_open(*impl_, std::move(requests), first_index);
}

Score Generator::score(std::string_view text) const {
  const LoadedModel& model = detail::loaded(impl_->model);
  // bos (when asked), the text, eos: the decoder reads all but eos, which is what a
  // target's limit counts.
  std::vector<int> ids;
  if (impl_->options.add_bos && model.config().bos_token_id) ids.push_back(*model.config().bos_token_id);
  const std::vector<int> target = model.tokenize_target(text, impl_->options.max_input_tokens);
  ids.insert(ids.end(), target.begin(), target.end());
  const std::vector<std::vector<int>> sequences{std::move(ids)};
  Score result = std::move(score_ids_batch(sequences).front());
  if (!result.ok()) throw Error(result.error);
  return result;
}

std::vector<Score> Generator::score_ids_batch(std::span<const std::vector<int>> sequences) const {
  const Transformer& transformer = detail::loaded(impl_->model).transformer();
  if (!transformer.decoder_only())
    throw Error("score", "this is an encoder-decoder model: a target is scored given a source",
                "use ordo::Translator::score, or ordo score --source ... --target ...");
  std::vector<Score> results;
  results.reserve(sequences.size());
  WorkspacePool::Lease workspace = impl_->workspaces->borrow();
  const auto batch = static_cast<std::size_t>(impl_->options.batch_size);
  for (std::size_t first = 0; first < sequences.size(); first += batch) {
    check_interrupt(impl_->options);
    const std::size_t count = std::min(batch, sequences.size() - first);
    for (Score& scored : score_batch(transformer, {}, sequences.subspan(first, count), *workspace))
      results.push_back(std::move(scored));
  }
  return results;
}

Attention Generator::attention(std::string_view text) const {
  const LoadedModel& model = detail::loaded(impl_->model);
  if (!model.transformer().decoder_only())
    throw Error("attention", "this is an encoder-decoder model: its attention is a source's and a target's",
                "use ordo::Translator::attention(source, target)");
  // As score() reads it: bos (when asked), then the text.
  return detail::record_attention(
      model, {}, model.tokenize_prompt(text, impl_->options.add_bos, {impl_->options.max_input_tokens, false}).ids);
}

const Model& Generator::model() const noexcept { return impl_->model; }
const GeneratorOptions& Generator::options() const noexcept { return impl_->options; }

}  // namespace ordo
