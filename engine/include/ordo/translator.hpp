// Translation with an encoder-decoder model: text in, text out, and below that the
// scores, the encoder's output and the attention weights of a sentence.
#pragma once

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

// Translates with one model and one set of options, both fixed at construction. Calls
// from several threads at once are safe; copies share their decoding buffers' pool.
class ORDO_API Translator {
 public:
  // Throws ordo::OptionError naming the first bad field of `options`, and ordo::Error
  // for a decoder-only model (use a Generator).
  explicit Translator(const Model& model, const TranslatorOptions& options = {});

  // The best translation of one sentence. Throws ordo::Error when it cannot be
  // translated (blank, not printable UTF-8, beyond max_input_tokens, no tokenizer).
  std::string translate(std::string_view text) const;
  // The same sentence with all n_best hypotheses, their ids and scores. Throws
  // ordo::Error as translate() does.
  Translation translate_detailed(std::string_view text) const;
  // Many sentences, results in input order; a sentence that fails has its `error` set
  // and does not stop the others (a blank line gives an empty hypothesis). Throws
  // ordo::Error only for what no sentence could survive (out of memory aside).
  std::vector<Translation> translate_batch(std::span<const std::string> lines) const;
  // The same with token ids in (eos included), used as given. Per-source errors.
  std::vector<Translation> translate_ids_batch(std::span<const std::vector<int>> sources) const;

  // log p(target | source) token by token, eos appended to the target (teacher forcing).
  // Throws ordo::Error when either text cannot be tokenized or is too long.
  Score score(std::string_view source, std::string_view target) const;
  // The encoder's output for a sentence [tokens, d_model]. Throws ordo::Error as
  // translate() does.
  EncoderOutput encode(std::string_view text) const;
  // Every head's attention probabilities (encoder, decoder and cross) while the decoder
  // reads `target` after `source`; with `target` empty, the greedy translation of
  // `source`. Throws ordo::Error as score() does.
  Attention attention(std::string_view source, std::string_view target = {}) const;

  // The model it translates with. Throws nothing.
  const Model& model() const noexcept;
  // Its options. Throws nothing.
  const TranslatorOptions& options() const noexcept;

  struct Impl;  // the engine's translator; opaque to programs

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace ordo::api

namespace ordo {
using namespace api;  // programs spell these ordo::X (see ordo/options.hpp)
}  // namespace ordo
