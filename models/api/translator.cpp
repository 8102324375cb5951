// ordo::Translator (public): the engine's Translator behind a stable face.
#include "models/api/internal.h"

namespace ordo::api {

Translator::Translator(const Model& model, const TranslatorOptions& options)
    : impl_(std::make_shared<const Impl>(
          Impl{model, options, ordo::Translator(model.impl_->model, detail::to_engine(options))})) {}

std::string Translator::translate(std::string_view text) const {
  return impl_->translator.translate(text).best().text;
}

Translation Translator::translate_detailed(std::string_view text) const {
  return detail::to_public(impl_->translator.translate(text));
}

namespace {
std::vector<Translation> to_public(std::vector<ordo::Translation> translations) {
  std::vector<Translation> result;
  result.reserve(translations.size());
  for (auto& t : translations) result.push_back(detail::to_public(std::move(t)));
  return result;
}
}  // namespace

std::vector<Translation> Translator::translate_batch(std::span<const std::string> lines) const {
  return to_public(impl_->translator.translate_batch(lines));
}

std::vector<Translation> Translator::translate_ids_batch(std::span<const std::vector<int>> sources) const {
  return to_public(impl_->translator.translate_ids_batch(sources));
}

Score Translator::score(std::string_view source, std::string_view target) const {
  return detail::to_public(impl_->translator.score(source, target));
}

EncoderOutput Translator::encode(std::string_view text) const {
  const ordo::Model& model = impl_->translator.model();
  EncoderOutput result;
  result.ids = model.tokenize_source(text, {impl_->options.max_input_tokens, impl_->options.truncate}).ids;
  result.tokens = model.source_pieces(result.ids);
  const Matrix states = ordo::encode(model.transformer(), result.ids);  // [S, d]
  result.rows = static_cast<int>(states.rows());
  result.cols = static_cast<int>(states.cols());
  result.values.assign(states.data(), states.data() + states.rows() * states.cols());
  return result;
}

Attention Translator::attention(std::string_view source, std::string_view target) const {
  const ordo::Model& model = impl_->translator.model();
  const std::vector<int> source_ids =
      model.tokenize_source(source, {impl_->options.max_input_tokens, impl_->options.truncate}).ids;
  // The target as the decoder reads it: decoder_start, then its tokens up to eos (the
  // row of the last one predicts eos).
  const std::vector<int> target_ids =
      target.empty() ? impl_->translator.translate_ids_batch(std::span(&source_ids, 1)).front().best().ids
                     : model.tokenize_target(target, impl_->options.max_input_tokens);
  std::vector<int> decoder_input{model.transformer().tokens.decoder_start};
  for (const int id : target_ids) {
    if (model.transformer().tokens.is_eos(id)) break;
    decoder_input.push_back(id);
  }
  return detail::record_attention(model, source_ids, decoder_input);
}

const Model& Translator::model() const noexcept { return impl_->model; }

const TranslatorOptions& Translator::options() const noexcept { return impl_->options; }

}  // namespace ordo::api
