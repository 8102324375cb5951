#include "models/nllb_tokenizer.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/printable.h"
#include "engine/regular_file.h"
#include "models/json_file.h"
#include "models/json_message.h"

namespace ordo {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kModelFile = "sentencepiece.bpe.model";
// fairseq's dictionary puts its four special tokens first; SentencePiece's piece i is
// fairseq's i + 1 (its own <unk>, <s>, </s> at 0..2 are replaced by these).
constexpr const char* kFairseqSpecials[] = {"<s>", "<pad>", "</s>", "<unk>"};
constexpr int kFairseqOffset = 1;
constexpr int kUnknownId = 3;

// A JSON object from a small file, or null when the file is absent.
json read_object(const fs::path& path) {
  if (!exists_quietly(path)) return nullptr;
  constexpr std::uint64_t kMaxBytes = 64u << 20;  // a tokenizer_config.json with 256k added tokens stays far below
  return read_json_object(path, kMaxBytes, "a JSON file");
}

const json* key_of(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto found = object.find(key);
  return found == object.end() || found->is_null() ? nullptr : &*found;
}

std::string string_key(const json& object, const char* key, const fs::path& path) {
  const json* value = key_of(object, key);
  if (value == nullptr) return "";
  if (!value->is_string())
    throw Error(path.string() + ": key '" + key + "'", "expected a string, got " + json_excerpt(*value));
  return value->get<std::string>();
}

// A token as transformers saves it: "eng_Latn", or {"content": "eng_Latn", ...}.
std::string token_content(const json& token, const fs::path& path, const std::string& key) {
  if (token.is_string()) return token.get<std::string>();
  if (token.is_object())
    if (const json* content = key_of(token, "content"); content != nullptr && content->is_string())
      return content->get<std::string>();
  throw Error(path.string() + ": key '" + key + "'", "expected a token (a string or {\"content\": ...}), got " +
                                                      json_excerpt(token));
}

// The class the directory's files name, and which file named it.
std::pair<std::string, fs::path> tokenizer_class(const fs::path& directory, const json& tokenizer_config) {
  if (std::string name = string_key(tokenizer_config, "tokenizer_class", directory / "tokenizer_config.json");
      !name.empty())
    return {name, directory / "tokenizer_config.json"};
  const json config = read_object(directory / "config.json");
  if (std::string name = string_key(config, "tokenizer_class", directory / "config.json"); !name.empty())
    return {name, directory / "config.json"};
  return {"", {}};
}

// The language codes, in the files' order: tokenizer_config.json's
// additional_special_tokens, else special_tokens_map.json's.
std::vector<std::string> listed_codes(const fs::path& directory, const json& tokenizer_config) {
  for (const fs::path& path : {directory / "tokenizer_config.json", directory / "special_tokens_map.json"}) {
    const json object = path.filename() == "tokenizer_config.json" ? tokenizer_config : read_object(path);
    const json* list = key_of(object, "additional_special_tokens");
    if (list == nullptr) continue;
    if (!list->is_array())
      throw Error(path.string() + ": key 'additional_special_tokens'",
                  "expected a list of language codes, got " + json_excerpt(*list));
    std::vector<std::string> codes;
    for (const json& token : *list) {
      std::string code = token_content(token, path, "additional_special_tokens");
      // A code is one token with one id: listed twice, or as a special token, it would
      // have two ids, and which one a text gets would depend on the lookup.
      const bool special = code == "<mask>" || std::ranges::find(kFairseqSpecials, code) != std::end(kFairseqSpecials);
      if (special || std::ranges::find(codes, code) != codes.end())
        throw Error(path.string() + ": key 'additional_special_tokens'",
                    "lists '" + printable(code) + "' " + (special ? "as a language code, but it is a special token"
                                                                   : "twice"),
                    "each language code appears once; are the tokenizer files intact?");
      codes.push_back(std::move(code));
    }
    if (!codes.empty()) return codes;
  }
  throw Error(directory.string(),
              "names no language codes (additional_special_tokens in tokenizer_config.json or "
              "special_tokens_map.json)",
              "an NLLB directory lists its language codes there; is it complete?");
}

// added_tokens_decoder: {"256001": {"content": "ace_Arab", ...}, ...} -> content -> id.
std::map<std::string, int> added_token_ids(const json& tokenizer_config, const fs::path& path, Index vocab_size) {
  std::map<std::string, int> ids;
  const json* decoder = key_of(tokenizer_config, "added_tokens_decoder");
  if (decoder == nullptr) return ids;
  if (!decoder->is_object())
    throw Error(path.string() + ": key 'added_tokens_decoder'", "expected an object {id: token}, got " +
                                                                    json_excerpt(*decoder));
  for (const auto& [key, token] : decoder->items()) {
    std::size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || id < 0 || id >= vocab_size)
      throw Error(path.string() + ": key 'added_tokens_decoder'",
                  "has the id \"" + printable(key) + "\", not an id of the embedding [0, vocab_size=" +
                      std::to_string(vocab_size) + ")",
                  "the tokenizer files and config.json belong to different models");
    ids.insert_or_assign(token_content(token, path, "added_tokens_decoder"), static_cast<int>(id));
  }
  return ids;
}

}  // namespace

std::optional<int> LanguageCodes::id(std::string_view code) const {
  for (std::size_t i = 0; i < codes.size(); ++i)
    if (codes[i] == code) return ids[i];
  return std::nullopt;
}

bool LanguageCodes::is_code(int id) const { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

std::string LanguageCodes::listed() const {
  constexpr std::size_t kShown = 12;  // all of them up to this many, else the first 8 and the last 2
  std::string text;
  const auto add = [&](const std::string& code) { text += (text.empty() ? "" : ", ") + printable(code); };
  if (codes.size() <= kShown) {
    for (const std::string& code : codes) add(code);
    return text;
  }
  for (std::size_t i = 0; i < 8; ++i) add(codes[i]);
  text += ", ...";
  for (std::size_t i = codes.size() - 2; i < codes.size(); ++i) add(codes[i]);
  return text + " (" + std::to_string(codes.size()) + " codes; ordo inspect lists them all)";
}

FamilyTokenizer load_m2m100_tokenizer(const fs::path& directory, const ModelConfig& config) {
  FamilyTokenizer result;
  const json tokenizer_config = read_object(directory / "tokenizer_config.json");
  const auto [name, named_by] = tokenizer_class(directory, tokenizer_config);
  const bool has_model = exists_quietly(directory / kModelFile);
  const bool has_vocab = exists_quietly(directory / "vocab.json");
  if (name.empty() && !has_model && !has_vocab) return result;  // no tokenizer: ids only
  if (name == "M2M100Tokenizer" || (name.empty() && has_vocab))
    throw Error(name.empty() ? (directory / "vocab.json").string() : named_by.string(),
                "M2M100Tokenizer (vocab.json with sentencepiece.bpe.model, \"__en__\" language codes) is not read "
                "yet; ordo reads NLLB's NllbTokenizer",
                "without the tokenizer files the model runs on token ids: --source-ids, --target-ids");
  if (!name.empty() && name != "NllbTokenizer" && name != "NllbTokenizerFast")
    throw Error(named_by.string() + ": key 'tokenizer_class'",
                "\"" + printable(name) + "\" is not a tokenizer ordo reads for an m2m_100 model",
                "ordo reads NllbTokenizer (sentencepiece.bpe.model); without the tokenizer files the model runs on "
                "token ids");
  if (!has_model)
    throw Error((directory / kModelFile).string(), "is missing, and an NLLB tokenizer needs it",
                "tokenizer.json alone is not read; add the model's sentencepiece.bpe.model, or pass token ids");

  // The special tokens are NllbTokenizer's fixed ids: the config must use the same.
  for (const auto& [key, id, piece] : {std::tuple{"pad_token_id", config.pad_token_id, 1},
                                       std::tuple{"eos_token_id", config.eos_token_id, 2}})
    if (id != piece)
      throw Error((directory / "config.json").string(), std::string("key '") + key + "' is " + std::to_string(id) +
                                                 ", but NllbTokenizer gives '" + kFairseqSpecials[piece] + "' the id " +
                                                 std::to_string(piece),
                  "the tokenizer files and config.json belong to different models");

  const fs::path model_path = directory / kModelFile;
  const std::vector<std::string> pieces = Tokenizer::load(model_path).model_pieces();
  std::vector<std::string> by_id(std::begin(kFairseqSpecials), std::end(kFairseqSpecials));
  by_id.resize(pieces.size() + kFairseqOffset);
  for (std::size_t i = std::size(kFairseqSpecials) - kFairseqOffset; i < pieces.size(); ++i)
    by_id[i + kFairseqOffset] = pieces[i];
  const int pieces_end = static_cast<int>(by_id.size());  // the first id after the pieces
  if (pieces_end > config.vocab_size)
    throw Error(model_path.string(), "has " + std::to_string(pieces.size()) + " pieces (ids up to " +
                                         std::to_string(pieces_end - 1) + " with fairseq's offset), more than the "
                                         "embedding's vocab_size=" + std::to_string(config.vocab_size) + " rows",
                "the tokenizer and config.json belong to different models");

  // The language codes and <mask>: at the ids added_tokens_decoder gives, else after the pieces.
  const fs::path config_path = directory / "tokenizer_config.json";
  const std::map<std::string, int> added = added_token_ids(tokenizer_config, config_path, config.vocab_size);
  LanguageCodes& languages = result.languages;
  languages.codes = listed_codes(directory, tokenizer_config);
  const auto place = [&](const std::string& token, int fallback) {
    const auto given = added.find(token);
    if (!added.empty() && given == added.end() && token != "<mask>")
      throw Error(config_path.string() + ": key 'added_tokens_decoder'",
                  "lacks the language code '" + printable(token) + "' that additional_special_tokens lists",
                  "the tokenizer files disagree; are they of one model?");
    const int id = given != added.end() ? given->second : fallback;
    if (id >= config.vocab_size)
      throw Error(directory.string(),
                  "the token '" + printable(token) + "' has the id " + std::to_string(id) + " (" +
                      std::to_string(pieces.size()) + " pieces + fairseq's offset + " +
                      std::to_string(languages.codes.size()) + " language codes + <mask>), beyond the embedding's "
                      "vocab_size=" + std::to_string(config.vocab_size) + " rows",
                  "the language code list and config.json belong to different models");
    if (id < pieces_end)
      throw Error(directory.string(), "the token '" + printable(token) + "' has the id " + std::to_string(id) +
                                          ", which is the SentencePiece piece '" + printable(by_id[static_cast<std::size_t>(id)]) + "'",
                  "the language codes follow the pieces; the tokenizer files disagree");
    if (static_cast<std::size_t>(id) >= by_id.size()) by_id.resize(static_cast<std::size_t>(id) + 1);
    if (!by_id[static_cast<std::size_t>(id)].empty())
      throw Error(directory.string(), "the tokens '" + printable(by_id[static_cast<std::size_t>(id)]) + "' and '" +
                                          printable(token) + "' have the same id " + std::to_string(id));
    by_id[static_cast<std::size_t>(id)] = token;
    return id;
  };
  for (std::size_t i = 0; i < languages.codes.size(); ++i)
    languages.ids.push_back(place(languages.codes[i], pieces_end + static_cast<int>(i)));
  // <mask> comes last in NllbTokenizer's vocabulary; a model whose embedding ends with
  // the codes (none published) simply has none.
  const int mask_fallback = pieces_end + static_cast<int>(languages.codes.size());
  if (added.contains("<mask>") || mask_fallback < config.vocab_size)
    result.special_ids.push_back(place("<mask>", mask_fallback));

  const json* legacy = key_of(tokenizer_config, "legacy_behaviour");
  if (legacy != nullptr && !legacy->is_boolean())
    throw Error(config_path.string() + ": key 'legacy_behaviour'", "expected true or false, got " + json_excerpt(*legacy));
  languages.after_eos = legacy != nullptr && legacy->get<bool>();

  auto vocabulary =
      std::make_shared<const PieceVocabulary>(PieceVocabulary::from_pieces(model_path, std::move(by_id), kUnknownId));
  result.tokenizer = std::make_shared<const Tokenizer>(Tokenizer::load(model_path, {vocabulary, false}));
  return result;
}

}  // namespace ordo
