// The request-level facade for generation: a prompt in, its continuation out.
//
//   auto model = ordo::Model::load("weights/german-llama");
//   ordo::Generator generator(model);                       // greedy, bos before text prompts
//   ordo::Generation g = generator.generate("Die Katze");
//   std::cout << g.prompt << g.best().text << '\n';          // Die Katze jagt den Hund.
//   generator.generate("Die Katze", "", [](std::string_view text) { std::cout << text << std::flush; });
//
// A decoder-only model continues the prompt; an encoder-decoder model continues a
// forced target prefix (the prompt) of the translation of `source`. Every option of
// DecodingOptions applies (beams, sampling, constraints); max_length counts generated
// tokens, the prompt excluded; generation stops at any eos id. Calls from several
// threads are safe; each borrows its own buffers from the generator's pool.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/search.h"
#include "engine/workspace_pool.h"
#include "models/model.h"
#include "models/translator.h"

namespace ordo {

struct GeneratorOptions {
  // How each prompt is continued: beam size, n-best, sampling, lengths, penalties.
  DecodingOptions decoding;
  // Prompts decoded together (generate_batch), shortest first.
  Index batch_size = 32;
  // Put the model's bos_token_id before each text prompt, as LLaMA models expect (no
  // effect when the config has none). Id prompts are read exactly as given.
  bool add_bos = true;
  // The most tokens a prompt may have, bos included (and a source, eos included, for an
  // encoder-decoder model); a longer one is an error for that prompt, or cut with
  // `truncate`. 0: the model's own limits (Model::max_prompt_tokens,
  // max_source_tokens). A Generator refuses a value above them. Texts to score are held
  // to it too. Applies to text; ids are used as given.
  Index max_input_tokens = 0;
  // Cut a prompt beyond max_input_tokens to its last tokens (after bos), and a source
  // to its first (and eos), instead of failing it; Generation::truncated says so. A cut
  // prompt also leaves the positions that decoding.max_length new tokens need
  // (kAutomaticGenerationLength when 0), when the model has that many.
  // Never applied to a text to score: it would be scored as another text.
  bool truncate = false;

  // Throws OptionError naming the first bad field.
  void validate() const;
};

struct Generation {
  std::string prompt;                            // the prompt text ("" for ids without a tokenizer)
  std::vector<int> prompt_ids;                   // what the decoder read before generating (bos included)
  std::string source;                            // encoder-decoder models: the source text
  std::vector<int> source_ids;                   // and its ids (eos included); empty for decoder-only
  std::vector<TranslatedHypothesis> hypotheses;  // continuations, best first; text as the prompt continues
  std::string error;                             // why this prompt failed; empty if it did not
  bool truncated = false;                        // the prompt or source was cut to max_input_tokens

  bool ok() const { return error.empty(); }
  // The best continuation; throws Error (the error above) when there is none.
  const TranslatedHypothesis& best() const;
};

class Generator {
 public:
  // Receives each piece of generated text as soon as its token is final.
  using TextCallback = std::function<void(std::string_view)>;

  // Throws OptionError for bad options.
  explicit Generator(std::shared_ptr<const Model> model, GeneratorOptions options = {});

  // Continues one prompt (for an encoder-decoder model, after translating `source`).
  // With beam_size 1 (greedy or sampling), `on_text` streams the continuation token by
  // token; with wider beams it receives the best continuation once, at the end.
  // Throws Error when the prompt cannot be continued.
  Generation generate(std::string_view prompt, std::string_view source = {}, const TextCallback& on_text = {}) const;

  // The input half of generate(): tokenizes and checks a prompt (and its source) within
  // max_input_tokens, without decoding. The result has prompt_ids, source_ids and
  // truncated, or its error set. A caller that shows the prompt before streaming its
  // continuation prepares first, so that a prompt that fails shows nothing.
  Generation prepare(std::string_view prompt, std::string_view source = {}) const;
  // The other half: continues a prepared request (see generate above), sampling from
  // stream `stream` (a caller answering many prompts one at a time gives prompt i stream
  // i, as generate_batch would). Throws Error (the request's own error, when it has one)
  // when it cannot be continued.
  Generation generate(Generation prepared, const TextCallback& on_text = {}, std::uint64_t stream = 0) const;

  // Many prompts, results in input order, per-prompt errors; prompt i samples from
  // stream first_stream + i. `sources` is empty for a decoder-only model, else one per
  // prompt.
  std::vector<Generation> generate_batch(std::span<const std::string> prompts,
                                         std::span<const std::string> sources = {},
                                         std::uint64_t first_stream = 0) const;

  // Prepared requests (prepare()) continued in batches, prompt i sampling from stream
  // first_stream + i. A request that has an error, or already has hypotheses, is passed
  // through as it is: a caller answering a stream of lines gives a blank line an empty
  // hypothesis this way and keeps every other line's sampling stream its line number.
  std::vector<Generation> generate_prepared(std::vector<Generation> requests, std::uint64_t first_stream = 0) const;

  // Token ids in, as given (no bos added); texts filled in when the model has a
  // tokenizer. `sources` as above, in ids (eos included).
  std::vector<Generation> generate_ids_batch(std::span<const std::vector<int>> prompts,
                                             std::span<const std::vector<int>> sources = {},
                                             std::uint64_t first_stream = 0) const;

  // Decoder-only models: log p(token | the tokens before) for every token of `text`
  // after the first, with bos before it (add_bos) and eos after it, so that the end is
  // scored too. Scored::target_ids are the scored tokens. Throws Error when the text
  // cannot be scored (blank, breaking the input rule, beyond max_input_tokens).
  Scored score(std::string_view text) const;
  // The same for id sequences, used as given (at least two tokens each); per-sequence
  // errors.
  std::vector<Scored> score_ids_batch(std::span<const std::vector<int>> sequences) const;

  // The text `generated` adds after `prompt` (leading space included), both in ids.
  std::string continuation_text(std::span<const int> prompt, std::span<const int> generated) const;

  const Model& model() const { return *model_; }
  const GeneratorOptions& options() const { return options_; }

 private:
  std::vector<Generation> decode_all(std::vector<Generation> requests, std::uint64_t first_stream) const;
  Model::InputLimit input_limit() const { return {options_.max_input_tokens, options_.truncate}; }
  Model::InputLimit prompt_limit() const;

  std::shared_ptr<const Model> model_;
  GeneratorOptions options_;
  std::shared_ptr<WorkspacePool> workspaces_ = std::make_shared<WorkspacePool>();
};

}  // namespace ordo
