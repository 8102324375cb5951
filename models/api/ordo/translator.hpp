// Translation with an encoder-decoder model: text in, text out, and below that the
// scores, the encoder's output and the attention weights of a sentence.
//
//   ordo::Translator translator(ordo::Model::load("weights/sinusoidal"));
//   std::string out = translator.translate("cats chase dogs");   // "Katzen jagen Hunde"
#pragma once

#include <cstdint>
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

struct TranslatorOptions {
  // How each sentence is decoded.
  DecodingOptions decoding;
  // The language codes of a multilingual model (Model::language_codes(): NLLB-200's
  // "eng_Latn", "deu_Latn", ...): sources are read as source_lang (its code goes into
  // every tokenized source and target as the model's tokenizer puts it), and every
  // translation starts with target_lang's code (it becomes decoding.forced_bos_token_id,
  // as transformers' generate() is told for NLLB). A model without language codes takes
  // neither (empty): the constructor (and with_options) throw ordo::OptionError
  // ("source_lang", "target_lang") for a code the model lacks, or any code on such a
  // model. A model with codes needs both to translate or score text (the target's alone
  // for translate_ids_batch; the source's alone for encode): those calls throw
  // ordo::OptionError naming the missing one, before any work.
  std::string source_lang;
  std::string target_lang;
  // Sentences decoded together: translate_batch sorts its input by length and decodes
  // it in batches of at most this many, so similar lengths share a batch (padding only
  // costs the encoder; the decoder's live set shrinks as sentences finish). In [1, 65536].
  int batch_size = 32;
  // The most tokens a source may have, eos included; a longer one is an error for that
  // sentence (or cut, with truncate). 0: the model's own limit (a learned table's
  // positions, else ordo's 4096); a Translator refuses a value above it. Targets to
  // score are held to it too. Applies to text; ids are used as given.
  int max_input_tokens = 0;
  // Cut a source beyond max_input_tokens to its first tokens and eos instead of failing
  // it; Translation::truncated says so. Never applied to a target to score: a cut
  // target would be scored as another text.
  bool truncate = false;
  // Runs on the calling thread before each text is tokenized, each batch and every
  // decoder step of a call (see InterruptCheck, ordo/options.hpp): throw from it to stop
  // the call. Empty: never stopped.
  InterruptCheck interrupt;

  // Throws ordo::OptionError naming the first bad field ("batch_size", "beam_size", ...).
  ORDO_API void validate() const;
};

// Translates with one model and one set of options, both fixed at construction. Calls
// from several threads at once are safe: each borrows its own decoding buffers from the
// translator's pool, which copies share.
class ORDO_API Translator {
 public:
  // Throws ordo::OptionError naming the first bad field of `options` (max_input_tokens
  // beyond what the model reads, say), and ordo::Error for a decoder-only model (use a
  // Generator).
  explicit Translator(const Model& model, const TranslatorOptions& options = {});

  // A translator of the same model with other options, sharing this one's decoding
  // buffers: as cheap as a copy, for a program whose options change from call to call
  // (a server, the Python bindings). Throws as the constructor does.
  Translator with_options(const TranslatorOptions& options) const;

  // The best translation of one sentence. Throws ordo::Error when it cannot be
  // translated (blank, not printable UTF-8, beyond max_input_tokens, no tokenizer).
  std::string translate(std::string_view text) const;

  // The same sentence with all n_best hypotheses, their ids and scores. Throws
  // ordo::Error as translate() does.
  Translation translate_detailed(std::string_view text) const;

  // Many sentences, results in input order; a sentence that fails has its `error` set
  // and does not stop the others (a blank line gives an empty hypothesis). Throws
  // ordo::Error only for what no sentence could survive (out of memory aside).
  // Sampling: sentence i draws from the stream seeded by (seed, first_index + i), so a
  // long input fed in chunks, each with the index of its first line, draws exactly as
  // one call would.
  std::vector<Translation> translate_batch(std::span<const std::string> lines, std::uint64_t first_index = 0) const;

  // The input half of a translation: tokenizes and checks one sentence within
  // max_input_tokens, without decoding. The result has source_ids and truncated, or its
  // error set; a blank sentence has its empty hypothesis already. For programs that
  // decode elsewhere (ContinuousBatch::add). Throws ordo::OptionError when a model with
  // language codes was given no source_lang or target_lang.
  Translation prepare(std::string_view text) const;

  // The same with token ids in (eos included), used as given; texts are filled in when
  // the model has a tokenizer. Per-source errors.
  std::vector<Translation> translate_ids_batch(std::span<const std::vector<int>> sources,
                                               std::uint64_t first_index = 0) const;

  // log p(target | source) token by token, eos appended to the target (teacher forcing).
  // Throws ordo::Error when either text cannot be tokenized or is too long: the message
  // names the side ("target: ..."). max_input_tokens bounds both; truncate cuts only the
  // source.
  Score score(std::string_view source, std::string_view target) const;

  // The same for many pairs, sources[i] -> targets[i], scored in batches of batch_size;
  // a pair that cannot be scored has its error set (naming the side, as score() does)
  // and does not stop the others. Throws ordo::Error when the two lists differ in length.
  std::vector<Score> score_batch(std::span<const std::string> sources, std::span<const std::string> targets) const;

  // The same for ids, used as given (targets should end with eos), pair i being
  // sources[i] -> targets[i]; per-pair errors in Score::error. Throws ordo::Error when
  // the two lists differ in length.
  std::vector<Score> score_ids_batch(std::span<const std::vector<int>> sources,
                                     std::span<const std::vector<int>> targets) const;

  // The encoder's output for a sentence [tokens, d_model]. Throws ordo::Error as
  // translate() does.
  EncoderOutput encode(std::string_view text) const;

  // Every head's attention probabilities (encoder, decoder and cross) while the decoder
  // reads `target` after `source`; with `target` empty, the greedy translation of
  // `source`. Throws ordo::Error as score() does.
  Attention attention(std::string_view source, std::string_view target = {}) const;

  // The same for ids, used as given: the decoder reads decoder_start and every target id
  // but the last, which row T-1 predicts (a target that ends with eos, as
  // translate_ids_batch's hypotheses do when finished, is read up to its eos). Throws
  // ordo::Error for an empty target or ids outside the vocabulary.
  Attention attention_ids(std::span<const int> source, std::span<const int> target) const;

  // The model it translates with. Throws nothing.
  const Model& model() const noexcept;
  // Its options. Throws nothing.
  const TranslatorOptions& options() const noexcept;

  struct Impl;  // the model, the options and the buffers' pool; opaque to programs

 private:
  explicit Translator(std::shared_ptr<const Impl> impl);

  std::shared_ptr<const Impl> impl_;
};

}  // namespace ordo
