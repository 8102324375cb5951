// LoadedModel: text to ids within the input limits (loaded_model.h: max_*_tokens, tokenize_*).
#include <algorithm>
#include <string>

#include "engine/error.h"
#include "engine/limits.h"
#include "models/loaded_model.h"
#include "engine/input_text.h"

namespace ordo {

namespace {

// The most ids one input may have, and what sets that number, for messages.
struct Bound {
  Index tokens = 0;
  std::string reason;
};

// `positions`: what the embedding allows (unbounded for computed positions); `taken`:
// positions something else holds first (an encoder-decoder model's decoder_start). A
// bounded table is learned, or (Marian) sinusoids computed into a table of
// max_position_embeddings rows, as MarianMTModel builds it: the message says which.
Bound model_bound(Index positions, Index taken, const ModelConfig& config) {
  if (positions <= kMaxSequenceLength)
    return {positions - taken, std::string(config.position_encoding == PositionEncoding::Learned
                                               ? "what the model's learned positions allow"
                                               : "what the model's table of sinusoidal positions holds") +
                                   " (max_position_embeddings=" + std::to_string(positions) + ")"};
  return {kMaxSequenceLength - taken, "ordo's limit of " + std::to_string(kMaxSequenceLength) + " positions"};
}

// The user's limit when it is the tighter one. A limit beyond the model's is refused by
// the facades (TranslatorOptions, GeneratorOptions) up front; here the model's wins.
Bound effective(Index max_tokens, const Bound& model) {
  if (max_tokens < 0)
    throw OptionError("max_input_tokens", "must be >= 0 (0: the model's limit), got " + std::to_string(max_tokens));
  if (max_tokens > 0 && max_tokens < model.tokens) return {max_tokens, "the limit set by --max-input-tokens"};
  return model;
}

// `counted`: which special token the count includes ("eos included"), or "".
[[noreturn]] void too_long(const char* what, const Bound& bound, const std::string& counted, const std::string& hint) {
  throw Error(what,
              "has more than " + std::to_string(bound.tokens) + " tokens" + (counted.empty() ? "" : " (" + counted + ")") +
                  ", " + bound.reason,
              hint);
}

}  // namespace

Index LoadedModel::max_source_tokens() const {
  if (!transformer_->encoder) return 0;
  return model_bound(transformer_->encoder->embedding().max_steps(), 0, config_).tokens;
}

Index LoadedModel::max_target_tokens() const {
  return model_bound(transformer_->decoder.max_steps(), 0, config_).tokens;
}

Index LoadedModel::max_prompt_tokens() const {
  return model_bound(transformer_->decoder.max_steps(), transformer_->decoder_only() ? 0 : 1, config_).tokens;
}

std::vector<int> LoadedModel::tokenize_source(std::string_view text, std::optional<int> language) const {
  return tokenize_source(text, InputLimit{}, language).ids;
}

void LoadedModel::add_language(std::vector<int>& ids, std::optional<int> language, const char* side) const {
  if (languages_.empty()) {
    if (language)
      throw Error(side, "this model has no language codes: it translates one pair",
                  "leave out --source-lang and --target-lang");
    ids.push_back(config_.eos_token_id);
    return;
  }
  if (!language)
    throw Error(side, "this model needs the text's language code (one of: " + languages_.listed() + ")",
                "translate, score, eval, compare, generate, tokenize and viz attention take --source-lang and "
                "--target-lang (TranslatorOptions and GeneratorOptions::source_lang, target_lang)");
  if (languages_.after_eos) {
    ids.push_back(config_.eos_token_id);
    ids.push_back(*language);
  } else {
    ids.insert(ids.begin(), *language);
    ids.push_back(config_.eos_token_id);
  }
}

LoadedModel::TokenizedInput LoadedModel::tokenize_source(std::string_view text, const InputLimit& limit,
                                                         std::optional<int> language) const {
  const Tokenizer& tokenizer = require(source_tokenizer_);
  if (!transformer_->encoder)
    throw Error("source", "this model is decoder-only: it has no encoder to read a source", "give a prompt instead");
  const Bound bound =
      effective(limit.max_tokens, model_bound(transformer_->encoder->embedding().max_steps(), 0, config_));
  const Index specials = language ? 2 : 1;  // eos, and the language code
  const std::string counted = language ? "eos and language code included" : "eos included";
  Tokenizer::Bounded text_ids =
      tokenizer.encode_bounded(text, std::max<Index>(bound.tokens - specials, 0), Tokenizer::Keep::Start);
  if (text_ids.more && !limit.truncate)
    too_long("input text", bound, counted,
             "--truncate keeps the first " + std::to_string(bound.tokens) + ", or split the line");
  add_language(text_ids.ids, language, "source");
  return {std::move(text_ids.ids), text_ids.more};
}

std::vector<int> LoadedModel::tokenize_target(std::string_view text, Index max_tokens,
                                              std::optional<int> language) const {
  const Bound bound = effective(max_tokens, model_bound(transformer_->decoder.max_steps(), 0, config_));
  const Index specials = language ? 2 : 1;
  Tokenizer::Bounded text_ids = require(target_tokenizer_)
                                    .encode_bounded(text, std::max<Index>(bound.tokens - specials, 0),
                                                    Tokenizer::Keep::Start);
  if (text_ids.more)
    too_long("input text", bound, language ? "eos and language code included" : "eos included",
             "a target is scored whole, never cut: shorten it");
  add_language(text_ids.ids, language, "target");
  return std::move(text_ids.ids);
}

std::vector<int> LoadedModel::tokenize_prompt(std::string_view text, bool add_bos) const {
  return tokenize_prompt(text, add_bos, InputLimit{}).ids;
}

LoadedModel::TokenizedInput LoadedModel::tokenize_prompt(std::string_view text, bool add_bos, const InputLimit& limit,
                                                         std::optional<int> language) const {
  std::vector<int> ids;
  if (add_bos && config_.bos_token_id) ids.push_back(*config_.bos_token_id);
  if (language) {
    if (languages_.empty())
      throw Error("prompt", "this model has no language codes: it translates one pair",
                  "leave out --source-lang and --target-lang");
    ids.push_back(*language);
  }
  const Tokenizer& tokenizer = require(target_tokenizer_);
  if (!ids.empty() && is_blank(text)) return {ids, false};  // bos (or the code) alone: from scratch
  const Bound bound = effective(limit.max_tokens, model_bound(transformer_->decoder.max_steps(),
                                                              transformer_->decoder_only() ? 0 : 1, config_));
  const Index room = std::max<Index>(bound.tokens - static_cast<Index>(ids.size()), 0);
  Tokenizer::Bounded text_ids = tokenizer.encode_bounded(text, room, Tokenizer::Keep::End);
  if (text_ids.more && !limit.truncate)
    too_long("input text", bound, ids.empty() ? "" : language ? "language code included" : "bos included",
             "--truncate keeps the last " + std::to_string(bound.tokens) + ", or shorten the prompt");
  ids.insert(ids.end(), text_ids.ids.begin(), text_ids.ids.end());
  return {std::move(ids), text_ids.more};
}

}  // namespace ordo
