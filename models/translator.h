// The request-level facade: text (or token ids) in, translations out.
//
//   auto model = ordo::Model::load("weights/sinusoidal");
//   ordo::TranslatorOptions options;
//   options.decoding.beam_size = 4;
//   options.decoding.n_best = 3;
//   ordo::Translator translator(model, options);
//   ordo::Translation t = translator.translate("cats chase dogs");
//   std::cout << t.best().text << '\n';                      // Katzen jagen Hunde
//   for (const auto& h : t.hypotheses) std::cout << h.text << ' ' << h.score << '\n';
//
// Tokenize -> decode -> detokenize lives here and nowhere else: the CLI commands and the
// tests all come through this class. A Translator's options and model never change;
// calls from several threads are safe: each borrows its own decoding buffers from the
// translator's pool (copies of a Translator share the pool).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/search.h"
#include "engine/workspace_pool.h"
#include "models/model.h"

namespace ordo {

struct TranslatorOptions {
  // How each source is decoded: beam size, n-best, sampling, lengths, penalties.
  DecodingOptions decoding;
  // Sources decoded together: translate_batch sorts its input by length and decodes
  // it in batches of at most this many, so similar lengths share a batch (padding only
  // costs the encoder; the decoder's live set shrinks as sentences finish).
  Index batch_size = 32;
  // The most tokens a source may have, eos included; a longer one is an error for that
  // source (or cut, with `truncate`). 0: the model's own limit, Model::max_source_tokens
  // (a learned table's positions, else ordo's 4096). A Translator refuses a value above
  // that. Score targets are held to it too. Applies to text; ids are used as given.
  Index max_input_tokens = 0;
  // Cut a source beyond max_input_tokens to its first tokens and eos instead of failing
  // it; Translation::truncated says so. Never applied to a target to score: a cut
  // target would be scored as another text.
  bool truncate = false;

  // Throws OptionError naming the first bad field ("batch_size", "beam_size", ...).
  void validate() const;
};

// Throws OptionError("max_input_tokens") unless the value is 0 or at least 2; the
// second form also when it is more than `model_limit`, the tokens the model reads per
// `what` ("source", "prompt"). TranslatorOptions and GeneratorOptions share them.
void check_max_input_tokens(Index max_input_tokens);
void check_max_input_tokens(Index max_input_tokens, Index model_limit, const std::string& what);

// One hypothesis with its text.
struct TranslatedHypothesis : Hypothesis {
  std::string text;  // the detokenized ids (empty when the model has no tokenizer)
};

struct Translation {
  std::string source;                            // the input text ("" for id input without a tokenizer)
  std::vector<int> source_ids;                   // what the encoder read, eos included
  std::vector<TranslatedHypothesis> hypotheses;  // n_best, best first; empty on error
  std::string error;                             // why this source failed; empty if it did not
  bool truncated = false;                        // the source was cut to max_input_tokens (truncate)

  bool ok() const { return error.empty(); }
  // The best hypothesis; throws Error (the error above) when there is none.
  const TranslatedHypothesis& best() const;
};

struct Scored {
  std::vector<int> target_ids;       // what was scored, eos included
  std::vector<float> token_logprobs;
  double score = 0.0;                // their sum
  std::string error;                 // empty unless this pair failed
  bool truncated = false;            // the source was cut to max_input_tokens (truncate)

  bool ok() const { return error.empty(); }
};

class Translator {
 public:
  // Throws OptionError for bad options (max_input_tokens beyond what the model reads,
  // say), Error for a decoder-only model (see Generator).
  explicit Translator(std::shared_ptr<const Model> model, TranslatorOptions options = {});

  // One sentence. Throws Error when it cannot be translated (empty text, too long, ...).
  Translation translate(std::string_view text) const;

  // Many sentences, results in input order. A sentence that fails (text that breaks
  // the input rule of tokenizer/input_text.h, too many tokens) has its `error` set and
  // does not stop the others; a blank line translates to an empty hypothesis.
  // Sampling streams are first_stream + i for line i: a caller that feeds a long input
  // in chunks passes each chunk's first line number to get the same draws as one call.
  std::vector<Translation> translate_batch(std::span<const std::string> lines,
                                           std::uint64_t first_stream = 0) const;

  // The same with token ids in (eos included), for models without a tokenizer; texts
  // are filled in when the model has one.
  std::vector<Translation> translate_ids_batch(std::span<const std::vector<int>> sources,
                                               std::uint64_t first_stream = 0) const;

  // log p(target | source) token by token, eos appended to the target (teacher
  // forcing). Throws Error when the pair cannot be scored. max_input_tokens bounds both
  // sides; truncate cuts only the source.
  Scored score(std::string_view source, std::string_view target) const;
  // Ids as given (targets should end with eos). Per-pair errors, like translate_batch.
  std::vector<Scored> score_ids_batch(std::span<const std::vector<int>> sources,
                                      std::span<const std::vector<int>> targets) const;

  // The encoder output [S, d] of a sentence (for comparing representations).
  Matrix encode(std::string_view text) const;

  const Model& model() const { return *model_; }
  const TranslatorOptions& options() const { return options_; }

 private:
  std::vector<Translation> decode_all(std::vector<Translation> requests, std::uint64_t first_stream) const;
  Model::InputLimit input_limit() const { return {options_.max_input_tokens, options_.truncate}; }

  std::shared_ptr<const Model> model_;
  TranslatorOptions options_;
  std::shared_ptr<WorkspacePool> workspaces_ = std::make_shared<WorkspacePool>();
};

}  // namespace ordo
