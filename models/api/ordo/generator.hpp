// Generation: a prompt in, its continuation out (decoder-only models such as the LLaMA
// family; an encoder-decoder model continues a forced start of a translation).
//
//   ordo::Generator generator(ordo::Model::load("weights/german-llama"));
//   std::string more = generator.generate("Die Katze");   // " jagt den Hund."
#pragma once

#include <cstdint>
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

namespace ordo {

struct GeneratorOptions {
  // How each prompt is continued. max_length counts generated tokens, the prompt
  // excluded; generation stops at any eos id.
  DecodingOptions decoding;
  // Prompts decoded together by the batch calls, shortest first. In [1, 65536].
  int batch_size = 32;
  // Put the model's bos token before each text prompt, as LLaMA models expect (no
  // effect when the config has none). Id prompts are read exactly as given.
  bool add_bos = true;
  // The language codes of a multilingual encoder-decoder model (Model::language_codes():
  // NLLB-200's "eng_Latn", "deu_Latn", ...), as TranslatorOptions takes them: each source
  // is read as source_lang, and each text prompt, the forced start of a translation into
  // target_lang, begins with that code's token, where the translation's first token would
  // be (transformers' decoder_input_ids [decoder_start, code, ...]). The code is then
  // part of the prompt, not generated, so decoding.forced_bos_token_id is not applied
  // (it would force a second code after the prompt). A model without language codes
  // takes neither (empty): the constructor (and with_options) throw ordo::OptionError
  // ("source_lang", "target_lang") for a code the model lacks, or any code on such a
  // model. A model with codes needs both for text: prepare() and the calls that
  // tokenize throw ordo::OptionError naming the missing one, before any work; id
  // prompts and sources carry their codes themselves and need none.
  std::string source_lang;
  std::string target_lang;
  // The most tokens a prompt may have, bos included (and a source, eos included, for an
  // encoder-decoder model); a longer one is an error for that prompt, or cut with
  // truncate. 0: the model's own limits; a Generator refuses a value above them. Texts
  // to score are held to it too. Applies to text; ids are used as given.
  int max_input_tokens = 0;
  // Cut a prompt beyond max_input_tokens to its last tokens (after bos), and a source to
  // its first (and eos), instead of failing it; Generation::truncated says so. A cut
  // prompt also leaves the positions that decoding.max_length new tokens need (128 when
  // 0), when the model has that many. Never applied to a text to score.
  bool truncate = false;
  // Runs on the calling thread before each text is tokenized, each batch and every
  // decoder step of a call (see InterruptCheck, ordo/options.hpp): throw from it to stop
  // the call. Empty: never stopped.
  InterruptCheck interrupt;

  // Throws ordo::OptionError naming the first bad field.
  ORDO_API void validate() const;
};

// Continues prompts with one model and one set of options, both fixed at construction.
// Calls from several threads at once are safe: each borrows its own decoding buffers
// from the generator's pool, which copies share.
class ORDO_API Generator {
 public:
  // Receives each piece of generated text as soon as its token is final.
  using TextCallback = std::function<void(std::string_view)>;
  // Receives each generated token with its text (GeneratedToken, ordo/results.hpp).
  using OnToken = std::function<void(const GeneratedToken&)>;

  // Throws ordo::OptionError naming the first bad field of `options`.
  explicit Generator(const Model& model, const GeneratorOptions& options = {});

  // A generator of the same model with other options, sharing this one's decoding
  // buffers: as cheap as a copy. Throws as the constructor does.
  Generator with_options(const GeneratorOptions& options) const;

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

  // The input half of a generation: tokenizes and checks a prompt (and, for an
  // encoder-decoder model, its source) within max_input_tokens, without decoding. The
  // result has prompt_ids, source_ids and truncated, or its error set. A program that
  // shows the prompt before streaming its continuation prepares first, so that a prompt
  // that fails shows nothing. Throws ordo::Error for a source given to a decoder-only
  // model, ordo::OptionError when a multilingual model's source_lang or target_lang is
  // missing.
  Generation prepare(std::string_view prompt, std::string_view source = {}) const;

  // The other half: continues a prepared request, `on_text` receiving the continuation
  // token by token (beam_size 1) or once at the end (wider beams), sampling from the
  // stream seeded by (seed, index). Throws ordo::Error (the request's own error, when it
  // has one) when it cannot be continued.
  Generation generate_prepared(Generation prepared, const TextCallback& on_text = {},
                               std::uint64_t index = 0) const;

  // generate_prepared, token by token: `on_token` receives each token of the best
  // continuation in order, its id, log-probability and the text it adds, eos included
  // (with empty text). With beam_size 1 each token comes as soon as it is chosen; with
  // wider beams no token is final before the search ends, so they all come then. The
  // texts of the tokens, joined, are the best hypothesis's text. What on_token throws
  // leaves the call. Throws ordo::Error as generate_prepared does.
  Generation generate_streamed(Generation prepared, const OnToken& on_token, std::uint64_t index = 0) const;

  // Many prepared requests, decoded in batches, results in input order; request i
  // samples from (seed, first_index + i). A request that has an error, or hypotheses
  // already, is passed through as it is: a program answering a stream of lines gives a
  // blank line an empty hypothesis this way, and every other line keeps its index.
  std::vector<Generation> generate_prepared_batch(std::vector<Generation> requests,
                                                  std::uint64_t first_index = 0) const;

  // Many prompts, results in input order, per-prompt errors; prompt i samples from
  // (seed, first_index + i). `sources` is empty for a decoder-only model, else one per
  // prompt. Throws ordo::Error only for what no prompt could survive (sources that do
  // not match the model or the prompts).
  std::vector<Generation> generate_batch(std::span<const std::string> prompts,
                                         std::span<const std::string> sources = {},
                                         std::uint64_t first_index = 0) const;

  // Token id prompts, used as given (no bos added), per-prompt errors; texts filled in
  // when the model has a tokenizer. `sources` as above, in ids (eos included).
  std::vector<Generation> generate_ids_batch(std::span<const std::vector<int>> prompts,
                                             std::span<const std::vector<int>> sources = {},
                                             std::uint64_t first_index = 0) const;

  // Decoder-only models: log p(token | the tokens before) for each token of `text`
  // after bos (add_bos), eos included, so that the end is scored too. Throws
  // ordo::Error when the text cannot be scored (blank, not printable UTF-8, beyond
  // max_input_tokens), and on an encoder-decoder model (Translator::score).
  Score score(std::string_view text) const;

  // The same for id sequences, used as given (at least two tokens each: the first is
  // read, not scored); per-sequence errors in Score::error.
  std::vector<Score> score_ids_batch(std::span<const std::vector<int>> sequences) const;

  // Decoder-only models: every head's self-attention while the decoder reads `text`
  // (bos first, as add_bos says). Throws ordo::Error as score() does.
  Attention attention(std::string_view text) const;

  // The model it generates with. Throws nothing.
  const Model& model() const noexcept;
  // Its options. Throws nothing.
  const GeneratorOptions& options() const noexcept;

  struct Impl;  // the model, the options and the buffers' pool; opaque to programs

 private:
  explicit Generator(std::shared_ptr<const Impl> impl);

  std::shared_ptr<const Impl> impl_;
};

}  // namespace ordo
