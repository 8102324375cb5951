// A model directory, loaded: config.json + model.safetensors or its shards (+ SentencePiece models).
//
//   auto model = ordo::Model::load("weights/sinusoidal");
//   auto source = model->tokenize_source("cats chase dogs");      // eos appended
//   auto best = ordo::greedy_search(model->transformer(), source);
//   std::cout << model->detokenize_target(best.ids) << '\n';      // Katzen jagen Hunde
//
// A Model is immutable after load(): share one std::shared_ptr<const Model> between
// threads; each call builds its own per-request state.
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
#include "models/weights.h"
#include "tokenizer/tokenizer.h"

namespace ordo {

class Model {
 public:
  // Receives load-time warnings (e.g. tensors the config does not use). The default
  // prints "ordo: warning: ..." to stderr.
  using WarningHandler = std::function<void(const std::string&)>;
  static void print_warning(const std::string& message);

  // Tokenizers are optional: `tokenizer.model` (shared), or `source.model` and
  // `target.model`. Without them, only id-based use works.
  static std::shared_ptr<const Model> load(const std::filesystem::path& directory,
                                           const WarningHandler& warn = print_warning);

  const std::filesystem::path& directory() const { return directory_; }
  const ModelConfig& config() const { return config_; }
  const Transformer& transformer() const { return *transformer_; }
  const WeightStore& weights() const { return *weights_; }

  bool has_tokenizer() const { return source_tokenizer_ != nullptr; }
  // Pieces of the (source) tokenizer; throws Error when there is none.
  Index tokenizer_vocab_size() const { return require(source_tokenizer_).vocab_size(); }
  // Text -> ids with eos appended. Throws Error when there is no tokenizer.
  std::vector<int> tokenize_source(std::string_view text) const;
  std::vector<int> tokenize_target(std::string_view text) const;
  // A prompt for the decoder to continue: the target tokenizer's ids without eos,
  // after bos_token_id when `add_bos` and the model has one. Empty text gives bos alone
  // (generation from scratch), or an error without bos.
  std::vector<int> tokenize_prompt(std::string_view text, bool add_bos) const;
  // Ids -> text. Source: eos and pad are skipped. Target: up to the first eos (any of
  // the eos ids), with pad, bos and decoder_start skipped.
  std::string detokenize_source(std::span<const int> ids) const;
  std::string detokenize_target(std::span<const int> ids) const;
  // Ids -> SentencePiece pieces ("▁cat"), for display.
  std::vector<std::string> source_pieces(std::span<const int> ids) const;
  std::vector<std::string> target_pieces(std::span<const int> ids) const;

 private:
  Model() = default;
  const Tokenizer& require(const std::shared_ptr<const Tokenizer>& tokenizer) const;

  std::filesystem::path directory_;
  ModelConfig config_;
  std::unique_ptr<const WeightStore> weights_;  // the transformer views into it
  std::unique_ptr<const Transformer> transformer_;
  std::shared_ptr<const Tokenizer> source_tokenizer_;
  std::shared_ptr<const Tokenizer> target_tokenizer_;
};

}  // namespace ordo
