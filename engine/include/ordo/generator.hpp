// Generation: a prompt in, its continuation out (decoder-only models such as the LLaMA
// family; an encoder-decoder model continues a forced start of a translation).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ordo/export.hpp"
#include "ordo/model.hpp"
#include "ordo/options.hpp"
#include "ordo/results.hpp"

namespace ordo::api {

// Continues prompts with one model and one set of options, both fixed at construction.
// Calls from several threads at once are safe.
class ORDO_API Generator {
 public:
  // Receives each piece of generated text as soon as its token is final.
  using TextCallback = std::function<void(std::string_view)>;

  // Throws ordo::OptionError naming the first bad field of `options`.
  explicit Generator(const Model& model, const GeneratorOptions& options = {});

  // The continuation of `prompt` (without the prompt). With beam_size 1, `on_text` (if
  // given) receives it token by token as it is generated. Throws ordo::Error when the
  // prompt cannot be continued (not printable UTF-8, too long, no tokenizer), and on an
  // encoder-decoder model, which continues a translation: use generate_detailed(prompt,
  // source).
  std::string generate(std::string_view prompt, const TextCallback& on_text = {}) const;
  // The same with all n_best continuations, ids and scores; for an encoder-decoder
  // model, `prompt` is a forced start of the translation of `source`. Throws
  // ordo::Error as generate() does.
  Generation generate_detailed(std::string_view prompt, std::string_view source = {}) const;
  // Many prompts of a decoder-only model, results in input order, per-prompt errors.
  // Throws ordo::Error only for what no prompt could survive.
  std::vector<Generation> generate_batch(std::span<const std::string> prompts) const;
  // Token id prompts, used as given (no bos added), per-prompt errors.
  std::vector<Generation> generate_ids_batch(std::span<const std::vector<int>> prompts) const;

  // Decoder-only models: log p(token | the tokens before) for each token of `text`
  // after bos, eos included. Throws ordo::Error when the text cannot be scored.
  Score score(std::string_view text) const;
  // Decoder-only models: every head's self-attention while the decoder reads `text`
  // (bos first, as add_bos says). Throws ordo::Error as score() does.
  Attention attention(std::string_view text) const;

  // The model it generates with. Throws nothing.
  const Model& model() const noexcept;
  // Its options. Throws nothing.
  const GeneratorOptions& options() const noexcept;

  struct Impl;  // the engine's generator; opaque to programs

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace ordo::api

namespace ordo {
using namespace api;  // programs spell these ordo::X (see ordo/options.hpp)
}  // namespace ordo
