// ordo::Generator (public): the engine's Generator behind a stable face.
#include "models/api/internal.h"

namespace ordo::api {

Generator::Generator(const Model& model, const GeneratorOptions& options)
    : impl_(std::make_shared<const Impl>(
          Impl{model, options, ordo::Generator(model.impl_->model, detail::to_engine(options))})) {}

namespace {
// An encoder-decoder model continues the translation of a source: without one there is
// nothing to continue (the engine would call the blank source "input text: is empty").
void require_source(const ordo::Model& model, std::string_view source) {
  if (!model.transformer().decoder_only() && source.empty())
    throw Error("generate", "this is an encoder-decoder model: it continues the translation of a source, and none "
                            "was given",
                "call generate_detailed(prompt, source) with the sentence to translate (the prompt is then the "
                "start of its translation), or ordo::Translator to translate it whole");
}
}  // namespace

std::string Generator::generate(std::string_view prompt, const TextCallback& on_text) const {
  require_source(impl_->generator.model(), {});
  return impl_->generator.generate(prompt, {}, on_text).best().text;
}

Generation Generator::generate_detailed(std::string_view prompt, std::string_view source) const {
  require_source(impl_->generator.model(), source);
  return detail::to_public(impl_->generator.generate(prompt, source));
}

namespace {
std::vector<Generation> to_public(std::vector<ordo::Generation> generations) {
  std::vector<Generation> result;
  result.reserve(generations.size());
  for (auto& g : generations) result.push_back(detail::to_public(std::move(g)));
  return result;
}
}  // namespace

std::vector<Generation> Generator::generate_batch(std::span<const std::string> prompts) const {
  return to_public(impl_->generator.generate_batch(prompts));
}

std::vector<Generation> Generator::generate_ids_batch(std::span<const std::vector<int>> prompts) const {
  return to_public(impl_->generator.generate_ids_batch(prompts));
}

Score Generator::score(std::string_view text) const { return detail::to_public(impl_->generator.score(text)); }

Attention Generator::attention(std::string_view text) const {
  const ordo::Model& model = impl_->generator.model();
  if (!model.transformer().decoder_only())
    throw Error("attention", "this is an encoder-decoder model: its attention is a source's and a target's",
                "use ordo::Translator::attention(source, target)");
  // As score() reads it: bos (when asked), then the text.
  return detail::record_attention(model, {},
                                  model.tokenize_prompt(text, impl_->options.add_bos,
                                                        {impl_->options.max_input_tokens, false}).ids);
}

const Model& Generator::model() const noexcept { return impl_->model; }

const GeneratorOptions& Generator::options() const noexcept { return impl_->options; }

}  // namespace ordo::api
