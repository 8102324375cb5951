// A model directory, loaded: config.json + model.safetensors or its shards (+ SentencePiece
// models), bound into a Transformer. What ordo::Model (the public handle, models/api/)
// holds; the engine-level tests and tools read its parts directly.
//
//   auto model = ordo::LoadedModel::load("weights/sinusoidal");
//   auto source = model->tokenize_source("cats chase dogs");      // eos appended
//   auto best = ordo::decode(model->transformer(), source);        // engine/search.h
//   std::cout << model->detokenize_target(best.front().ids) << '\n';  // Katzen jagen Hunde
//
// A LoadedModel is immutable after load(): share one std::shared_ptr<const LoadedModel>
// between threads; each call builds its own per-request state.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/transformer.h"
#include "models/config.h"
#include "models/generation_config.h"
#include "models/nllb_tokenizer.h"
#include "models/weights.h"
#include "tokenizer/tokenizer.h"

namespace ordo {

class LoadedModel {
 public:
  // Receives load-time warnings (e.g. tensors the config does not use). The default
  // prints "ordo: warning: ..." to stderr.
  using WarningHandler = std::function<void(const std::string&)>;
  static void print_warning(const std::string& message);

  // Tokenizers are optional: `tokenizer.model` (shared), or `source.model` and
  // `target.model`. Without them, only id-based use works.
  // `adjust` may change the config read from config.json before the weights are bound
  // (a run-time override: Model::load's LoadOptions).
  using ConfigAdjustment = std::function<void(ModelConfig&)>;
  static std::shared_ptr<const LoadedModel> load(const std::filesystem::path& directory,
                                           const WarningHandler& warn = print_warning,
                                           const ConfigAdjustment& adjust = {});

  const std::filesystem::path& directory() const { return directory_; }
  const ModelConfig& config() const { return config_; }
  const Transformer& transformer() const { return *transformer_; }
  const WeightStore& weights() const { return *weights_; }
  // The checkpoint's decoding defaults (generation_config.json, models/generation_config.h);
  // its decoder_start_token_id and eos_token_id are already the transformer's tokens.
  const GenerationConfig& generation() const { return generation_; }

  bool has_tokenizer() const { return source_tokenizer_ != nullptr; }
  // Pieces of the (source) tokenizer; throws Error when there is none.
  Index tokenizer_vocab_size() const { return require(source_tokenizer_).vocab_size(); }
  // The longest input this model reads, counted in the ids the tokenize functions
  // return: a source with its eos, a target with its eos, a prompt with its bos (a
  // decoder-only model; an encoder-decoder model's decoder_start takes a position
  // too). Each is what the positions allow (a learned table holds
  // max_position_embeddings), and never more than ordo's limit, kMaxSequenceLength.
  Index max_source_tokens() const;
  Index max_target_tokens() const;
  Index max_prompt_tokens() const;

  // A limit on one input: at most `max_tokens` ids (0: the model's own limit above).
  // Beyond it, an Error that names the limit; or, with `truncate`, the input cut to
  // it: a source keeps its first tokens (the words a translation starts from) and its
  // eos, a prompt its last tokens (the words a continuation follows) after its bos.
  // Only as much of a long text is tokenized as the limit needs (encode_bounded).
  struct InputLimit {
    Index max_tokens = 0;
    bool truncate = false;
  };
  struct TokenizedInput {
    std::vector<int> ids;
    bool truncated = false;  // cut to the limit (only with truncate)
  };

  // The model's language codes (NLLB's "eng_Latn", ...); empty for a model of one
  // language pair.
  const LanguageCodes& languages() const { return languages_; }

  // Text -> ids with eos appended, within the limit. Throws Error when the text breaks
  // the input rule (ordo/text.hpp), is blank, or when there is no tokenizer.
  // `language`: the token of the text's language code (languages()), put where the
  // family puts it (NLLB: first, or after eos with legacy_behaviour) and counted in the
  // limit; a model with language codes needs one (else Error), one without takes none.
  std::vector<int> tokenize_source(std::string_view text, std::optional<int> language = std::nullopt) const;  // the model's limit
  TokenizedInput tokenize_source(std::string_view text, const InputLimit& limit,
                                 std::optional<int> language = std::nullopt) const;
  // Targets are scored whole, never cut: beyond `max_tokens` (0: the model's limit)
  // they are an Error. `language` as for a source.
  std::vector<int> tokenize_target(std::string_view text, Index max_tokens = 0,
                                   std::optional<int> language = std::nullopt) const;
  // A prompt for the decoder to continue: the target tokenizer's ids without eos,
  // after bos_token_id when `add_bos` and the model has one. Blank text gives bos alone
  // (generation from scratch), or an error without bos. `language`: the token of a
  // multilingual model's target language code, put first (before the pieces, as a
  // translation into it starts; with legacy_behaviour too, which moves only a scored
  // target's code) and counted in the limit; blank text then gives the code alone.
  // Throws Error for a language given to a model without codes.
  std::vector<int> tokenize_prompt(std::string_view text, bool add_bos) const;  // the model's limit
  TokenizedInput tokenize_prompt(std::string_view text, bool add_bos, const InputLimit& limit,
                                 std::optional<int> language = std::nullopt) const;
  // Ids -> text. Language codes and the family's other special tokens are skipped too.
  // Source: eos and pad are skipped. Target: up to the first eos (any of
  // the eos ids), with pad, bos and decoder_start skipped.
  std::string detokenize_source(std::span<const int> ids) const;
  std::string detokenize_target(std::span<const int> ids) const;
  // Ids -> SentencePiece pieces ("▁cat"), for display.
  std::vector<std::string> source_pieces(std::span<const int> ids) const;
  std::vector<std::string> target_pieces(std::span<const int> ids) const;

 private:
  LoadedModel() = default;
  const Tokenizer& require(const std::shared_ptr<const Tokenizer>& tokenizer) const;
  // Puts `language` around text ids (eos appended), as the family does; checks it is given
  // exactly when the model has language codes.
  void add_language(std::vector<int>& ids, std::optional<int> language, const char* side) const;
  bool is_special_text_id(int id) const;

  std::filesystem::path directory_;
  ModelConfig config_;
  std::unique_ptr<const WeightStore> weights_;  // the transformer views into it
  std::unique_ptr<const Transformer> transformer_;
  std::shared_ptr<const Tokenizer> source_tokenizer_;
  std::shared_ptr<const Tokenizer> target_tokenizer_;
  GenerationConfig generation_;
  LanguageCodes languages_;
  std::vector<int> special_ids_;  // the family's further ids without text (<mask>)
};

}  // namespace ordo
