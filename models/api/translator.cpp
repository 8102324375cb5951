// ordo::Translator: text (or ids) in, translations out. Tokenize -> decode ->
// detokenize lives here and nowhere else: the CLI, the tests and programs all come
// through this class.
#include <algorithm>

#include "engine/decode_inputs.h"
#include "engine/error.h"
#include "engine/limits.h"
#include "engine/score.h"
#include "engine/search.h"
#include "models/api/internal.h"
#include "engine/input_text.h"

namespace ordo {

namespace {

LoadedModel::InputLimit input_limit(const Translator::Impl& impl) {
  return {impl.options.max_input_tokens, impl.options.truncate};
}

// Throws unless `options` suit `model`: what the constructor and with_options check.
void check_translator(const Model& model, const TranslatorOptions& options) {
  const LoadedModel& loaded = detail::loaded(model);
  if (loaded.transformer().decoder_only())
    throw Error(loaded.directory().string(),
                "is a decoder-only model: it continues text rather than translating it",
                "use ordo generate (ordo::Generator)");
  options.validate();
  detail::check_max_input_tokens(options.max_input_tokens, loaded.max_source_tokens(), "source");
}

// The translator's state for `options`: their language codes as tokens, and the
// target's forced as the first generated token. Throws OptionError for a code the model
// lacks, or any code for a model without codes. A missing code is found by the call that
// needs it (require_languages): a translator for ids, or one that only derives others
// with with_options (a server's, the Python bindings'), needs none.
Translator::Impl make_impl(const Model& model, TranslatorOptions options,
                           std::shared_ptr<WorkspacePool> workspaces = std::make_shared<WorkspacePool>()) {
  check_translator(model, options);
  const LoadedModel& loaded = detail::loaded(model);
  std::optional<int> source, target;
  if (!options.source_lang.empty()) source = detail::language_id(loaded, options.source_lang, "source_lang");
  if (!options.target_lang.empty()) {
    target = detail::language_id(loaded, options.target_lang, "target_lang");
    options.decoding.forced_bos_token_id = *target;
  }
  return Translator::Impl{model, std::move(options), source, target, std::move(workspaces)};
}

// A model with language codes reads a text only with its source's code, and translates
// only into a target language: OptionError naming the option that is missing.
void require_languages(const Translator::Impl& impl, bool source, bool target) {
  const LanguageCodes& languages = detail::loaded(impl.model).languages();
  if (languages.empty()) return;
  if (source && !impl.source_language) (void)detail::language_id(detail::loaded(impl.model), "", "source_lang");
  if (target && !impl.target_language) (void)detail::language_id(detail::loaded(impl.model), "", "target_lang");
}

// A line's input half (Translator::prepare): its ids, or its error; a blank line is an
// empty translation already, not an error.
Translation prepare_source(const Translator::Impl& impl, std::string_view text) {
  Translation r;
  r.source = std::string(text);
  if (is_blank(r.source)) {
    r.hypotheses.emplace_back().finished = true;
    return r;
  }
  try {
    LoadedModel::TokenizedInput source =
        detail::loaded(impl.model).tokenize_source(r.source, input_limit(impl), impl.source_language);
    r.source_ids = std::move(source.ids);
    r.truncated = source.truncated;
  } catch (const Error& e) {
    r.error = e.what();
  }
  return r;
}

void check_interrupt(const TranslatorOptions& options) {
  if (options.interrupt) options.interrupt();
}

}  // namespace

std::vector<int> detail::forced_prefix(const Translation&) { return {}; }

std::string detail::hypothesis_text(const LoadedModel& model, const Translation&, std::span<const int> ids) {
  return model.detokenize_target(ids);
}

void TranslatorOptions::validate() const {
  decoding.validate();
  check_batch_size(batch_size);
  detail::check_max_input_tokens(max_input_tokens);
}

int detail::language_id(const LoadedModel& model, std::string_view code, const std::string& field) {
  const LanguageCodes& languages = model.languages();
  if (languages.empty())
    throw OptionError(field, "this model has no language codes (it translates one pair), got \"" +
                                 escape_control_characters(std::string(code)) + "\"");
  if (code.empty())
    throw OptionError(field, "this model translates between languages and needs a language code, one of: " +
                                 languages.listed());
  if (const auto id = languages.id(code)) return *id;
  throw OptionError(field, "unknown language code \"" + escape_control_characters(std::string(code)) +
                               "\"; this model's codes: " + languages.listed());
}

Translator::Translator(const Model& model, const TranslatorOptions& options)
    : impl_(std::make_shared<const Impl>(make_impl(model, options))) {}

Translator::Translator(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Translator Translator::with_options(const TranslatorOptions& options) const {
  return Translator(std::make_shared<const Impl>(make_impl(impl_->model, options, impl_->workspaces)));
}

std::string Translator::translate(std::string_view text) const { return translate_detailed(text).best().text; }

Translation Translator::translate_detailed(std::string_view text) const {
  if (is_blank(text)) throw Error("input text", "is empty", "give a sentence to translate");
  const std::vector<std::string> one{std::string(text)};
  Translation result = std::move(translate_batch(one).front());
  if (!result.ok()) throw Error(result.error);
  return result;
}

std::vector<Translation> Translator::translate_batch(std::span<const std::string> lines,
                                                     std::uint64_t first_index) const {
  require_languages(*impl_, true, true);
  std::vector<Translation> requests(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    check_interrupt(impl_->options);
    requests[i] = prepare_source(*impl_, lines[i]);
  }
  return detail::decode_open(*impl_, std::move(requests), first_index);
}

Translation Translator::prepare(std::string_view text) const {
  require_languages(*impl_, true, true);
  return prepare_source(*impl_, text);
}

std::vector<Translation> Translator::translate_ids_batch(std::span<const std::vector<int>> sources,
                                                         std::uint64_t first_index) const {
  require_languages(*impl_, false, true);  // the ids hold the source's code; the target's is forced
  const LoadedModel& model = detail::loaded(impl_->model);
  std::vector<Translation> requests(sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    requests[i].source_ids = sources[i];
    if (model.has_tokenizer()) {
      try {
        requests[i].source = model.detokenize_source(sources[i]);
      } catch (const Error& e) {
        requests[i].error = e.what();
      }
    }
  }
  return detail::decode_open(*impl_, std::move(requests), first_index);
}

Score Translator::score(std::string_view source, std::string_view target) const {
  const std::vector<std::string> sources{std::string(source)}, targets{std::string(target)};
  Score result = std::move(score_batch(sources, targets).front());
  if (!result.ok()) throw Error(result.error);
  return result;
}

std::vector<Score> Translator::score_batch(std::span<const std::string> sources,
                                           std::span<const std::string> targets) const {
  if (sources.size() != targets.size())
    throw Error("score", std::to_string(sources.size()) + " sources for " + std::to_string(targets.size()) + " targets");
  require_languages(*impl_, true, true);
  const LoadedModel& model = detail::loaded(impl_->model);
  std::vector<Score> results(sources.size());
  // The pairs that tokenize, in ids, and where each one's score goes.
  std::vector<std::vector<int>> source_ids, target_ids;
  std::vector<std::size_t> origin;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    check_interrupt(impl_->options);
    const char* side = "source";  // errors name the side at fault: "target: input text: is empty ..."
    try {
      LoadedModel::TokenizedInput cut = model.tokenize_source(sources[i], input_limit(*impl_), impl_->source_language);
      side = "target";
      target_ids.push_back(model.tokenize_target(targets[i], impl_->options.max_input_tokens, impl_->target_language));
      source_ids.push_back(std::move(cut.ids));
      results[i].truncated = cut.truncated;
      origin.push_back(i);
    } catch (const Error& e) {
      results[i].error = Error(side, e.what()).what();
    }
  }
  std::vector<Score> scored = score_ids_batch(source_ids, target_ids);
  for (std::size_t k = 0; k < origin.size(); ++k) {
    scored[k].truncated = results[origin[k]].truncated;
    results[origin[k]] = std::move(scored[k]);
  }
  return results;
}

std::vector<Score> Translator::score_ids_batch(std::span<const std::vector<int>> sources,
                                               std::span<const std::vector<int>> targets) const {
  if (sources.size() != targets.size())
    throw Error("score", std::to_string(sources.size()) + " sources for " + std::to_string(targets.size()) + " targets");
  const Transformer& transformer = detail::loaded(impl_->model).transformer();
  std::vector<Score> results;
  results.reserve(targets.size());
  const auto batch = static_cast<std::size_t>(impl_->options.batch_size);
  WorkspacePool::Lease workspace = impl_->workspaces->borrow();
  for (std::size_t first = 0; first < sources.size(); first += batch) {
    check_interrupt(impl_->options);
    const std::size_t count = std::min(batch, sources.size() - first);
    for (Score& scored :
         ordo::score_batch(transformer, sources.subspan(first, count), targets.subspan(first, count), *workspace))
      results.push_back(std::move(scored));
  }
  return results;
}

EncoderOutput Translator::encode(std::string_view text) const {
  require_languages(*impl_, true, false);
  const LoadedModel& model = detail::loaded(impl_->model);
  EncoderOutput result;
  result.ids = model.tokenize_source(text, input_limit(*impl_), impl_->source_language).ids;
  result.tokens = model.source_pieces(result.ids);
  const Matrix states = ordo::encode(model.transformer(), result.ids);  // [S, d]
  result.rows = static_cast<int>(states.rows());
  result.cols = static_cast<int>(states.cols());
  result.values.assign(states.data(), states.data() + states.rows() * states.cols());
  return result;
}

Attention Translator::attention(std::string_view source, std::string_view target) const {
  require_languages(*impl_, true, true);
  const LoadedModel& model = detail::loaded(impl_->model);
  const std::vector<int> source_ids = model.tokenize_source(source, input_limit(*impl_), impl_->source_language).ids;
  const std::vector<int> target_ids =
      target.empty() ? translate_ids_batch(std::span(&source_ids, 1)).front().best().ids
                     : model.tokenize_target(target, impl_->options.max_input_tokens, impl_->target_language);
  return attention_ids(source_ids, target_ids);
}

Attention Translator::attention_ids(std::span<const int> source, std::span<const int> target) const {
  const LoadedModel& model = detail::loaded(impl_->model);
  if (target.empty()) throw Error("attention", "the target is empty: the decoder reads nothing to attend from");
  // The last target id is what the last row predicts; it is never read.
  std::vector<int> decoder_input{model.transformer().tokens.decoder_start};
  decoder_input.insert(decoder_input.end(), target.begin(), target.end() - 1);
  return detail::record_attention(model, std::vector<int>(source.begin(), source.end()), decoder_input);
}

const Model& Translator::model() const noexcept { return impl_->model; }
const TranslatorOptions& Translator::options() const noexcept { return impl_->options; }

}  // namespace ordo
