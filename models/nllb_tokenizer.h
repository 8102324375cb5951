// The tokenizer description of the m2m_100 family: NLLB-200's NllbTokenizer, read from
// the files a published directory (or save_pretrained) holds.
//
//   sentencepiece.bpe.model   the SentencePiece model; piece i becomes id i + 1 (fairseq's
//                             offset), and ids 0..3 are <s>, <pad>, </s>, <unk>
//   tokenizer_config.json     tokenizer_class ("NllbTokenizer" or "NllbTokenizerFast"),
//                             additional_special_tokens (the language codes),
//                             added_tokens_decoder (their ids, when present),
//                             legacy_behaviour [false]
//   special_tokens_map.json   additional_special_tokens, when tokenizer_config.json has none
//
// Which tokenizer: tokenizer_config.json's tokenizer_class, else config.json's, else the
// files (sentencepiece.bpe.model without vocab.json is NLLB's). M2M100Tokenizer (vocab.json
// + sentencepiece.bpe.model, "__en__" codes) and any other class are refused by name.
// The language codes follow the pieces (ids len(spm) + 1 + i, then <mask>) unless
// added_tokens_decoder gives their ids. A source is [code] + pieces + [</s>] (with
// legacy_behaviour: pieces + [</s>, code]); a target the same with the target's code;
// translation starts from decoder_start_token_id with the target code forced first.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/config.h"
#include "tokenizer/tokenizer.h"

namespace ordo {

// A model's language codes ("eng_Latn"), each one token, and where a text's goes.
struct LanguageCodes {
  std::vector<std::string> codes;  // in the order the files list them
  std::vector<int> ids;            // ids[i] is the token of codes[i]
  bool after_eos = false;          // legacy_behaviour: text + [eos, code]; else [code] + text + [eos]

  bool empty() const { return codes.empty(); }
  std::optional<int> id(std::string_view code) const;
  bool is_code(int id) const;
  // "ace_Arab, ace_Latn, ... (202 codes)": the first and last few when there are many.
  std::string listed() const;
};

struct FamilyTokenizer {
  std::shared_ptr<const Tokenizer> tokenizer;  // null: the directory has no tokenizer files (ids only)
  LanguageCodes languages;
  std::vector<int> special_ids;  // further ids with no text (<mask>)
};

// Throws Error naming the file for anything it does not read (another tokenizer class,
// a malformed key), a language code list that disagrees with the SentencePiece model or
// the embedding (vocab_size), or special tokens that are not the config's.
FamilyTokenizer load_m2m100_tokenizer(const std::filesystem::path& directory, const ModelConfig& config);

}  // namespace ordo
