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

  // Many prompts, results in input order, per-prompt errors; prompt i samples from
  // stream first_stream + i. `sources` is empty for a decoder-only model, else one per
  // prompt.
  std::vector<Generation> generate_batch(std::span<const std::string> prompts,
                                         std::span<const std::string> sources = {},
                                         std::uint64_t first_stream = 0) const;

  // Token ids in, as given (no bos added); texts filled in when the model has a
  // tokenizer. `sources` as above, in ids (eos included).
  std::vector<Generation> generate_ids_batch(std::span<const std::vector<int>> prompts,
                                             std::span<const std::vector<int>> sources = {},
                                             std::uint64_t first_stream = 0) const;

  // Decoder-only models: log p(token | the tokens before) for every token of `text`
  // after the first, with bos before it (add_bos) and eos after it, so that the end is
  // scored too. Scored::target_ids are the scored tokens. Throws Error when the text
  // cannot be scored.
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

  std::shared_ptr<const Model> model_;
  GeneratorOptions options_;
  std::shared_ptr<WorkspacePool> workspaces_ = std::make_shared<WorkspacePool>();
};

}  // namespace ordo
