#include "models/loaded_model.h"

#include <malloc.h>

#include <algorithm>
#include <iostream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/kernel_path.h"
#include "engine/printable.h"
#include "engine/regular_file.h"
#include "models/json_file.h"
#include "models/json_message.h"
#include "models/build_transformer.h"
#include "models/t5_tokenizer.h"

namespace ordo {

namespace fs = std::filesystem;

namespace {

// std::filesystem queries without exceptions: an unreadable directory is reported by
// the load that follows, with a message that names the file.
bool is_directory_quietly(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error);
}
std::shared_ptr<const Tokenizer> load_tokenizer(const fs::path& path, Index model_vocab,
                                                const char* vocab_key) {
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::load(path));
  if (tokenizer->vocab_size() > model_vocab)
    throw Error(path.string(), "has " + std::to_string(tokenizer->vocab_size()) +
                                   " pieces, more than the model's " + vocab_key + "=" +
                                   std::to_string(model_vocab),
                "the tokenizer belongs to another model");
  return tokenizer;
}

// Marian's tokenizer files (MarianTokenizer): source.spm reads sources, target.spm
// targets; both map their pieces to ids through vocab.json, or the target through
// target_vocab.json when tokenizer_config.json says "separate_vocabs": true. A leading
// ">>xx<<" language token is one id; eos (</s>) is appended by the tokenize functions.
constexpr const char* kMarianFiles[] = {"source.spm", "target.spm", "vocab.json"};

bool marian_separate_vocabs(const fs::path& directory) {
  const fs::path path = directory / "tokenizer_config.json";
  if (!exists_quietly(path)) return false;
  constexpr std::uint64_t kMaxBytes = 16u << 20;
  const nlohmann::json json = read_json_object(path, kMaxBytes, "a tokenizer_config.json");
  const auto found = json.find("separate_vocabs");
  if (found == json.end() || found->is_null()) return false;
  if (!found->is_boolean())
    throw Error(path.string() + ": key 'separate_vocabs'", "expected true or false, got " + json_excerpt(*found));
  return found->get<bool>();
}

// The vocabulary's special pieces must be the config's tokens, and its ids rows of the
// embedding: a vocab.json of another model fails here, not in a translation.
void check_marian_vocabulary(const PieceVocabulary& vocabulary, const ModelConfig& config) {
  const std::string where = vocabulary.path().string();
  if (vocabulary.id_bound() > config.vocab_size)
    throw Error(where, "has the id " + std::to_string(vocabulary.id_bound() - 1) +
                           ", beyond the embedding's vocab_size=" + std::to_string(config.vocab_size) + " rows",
                "vocab.json and config.json (model.safetensors) belong to different models");
  for (const auto& [piece, key, id] : {std::tuple{"</s>", "eos_token_id", config.eos_token_id},
                                       std::tuple{"<pad>", "pad_token_id", config.pad_token_id}}) {
    if (!vocabulary.contains(piece))
      throw Error(where, std::string("has no '") + piece + "' piece (config.json's " + key + "=" +
                             std::to_string(id) + ")",
                  "vocab.json and config.json belong to different models");
    if (vocabulary.id(piece) != id)
      throw Error(where, std::string("gives '") + piece + "' the id " + std::to_string(vocabulary.id(piece)) +
                             ", but config.json's " + key + " is " + std::to_string(id),
                  "vocab.json and config.json belong to different models");
  }
}

std::shared_ptr<const Tokenizer> load_marian_tokenizer(const fs::path& model, const fs::path& vocabulary_path,
                                                       const ModelConfig& config) {
  auto vocabulary = std::make_shared<const PieceVocabulary>(PieceVocabulary::load(vocabulary_path, "<unk>"));
  check_marian_vocabulary(*vocabulary, config);
  return std::make_shared<const Tokenizer>(Tokenizer::load(model, {vocabulary, true}));
}

}  // namespace

void LoadedModel::print_warning(const std::string& message) {
  std::cerr << "ordo: warning: " << message << '\n';
}

std::shared_ptr<const LoadedModel> LoadedModel::load(const fs::path& directory, const WarningHandler& warn,
                                                     const ConfigAdjustment& adjust) {
  kernels::check_kernel_setting();
  if (directory.empty())
    throw Error("model directory", "the path is empty", "give the directory that holds config.json");
  if (!is_directory_quietly(directory))
    throw Error(directory.string(), "is not a model directory",
                "a model directory holds config.json and model.safetensors");
  std::shared_ptr<LoadedModel> model(new LoadedModel());  // private constructor: make_shared can't reach it
  model->directory_ = directory;
  model->config_ = ModelConfig::load(directory / "config.json");
  if (adjust) adjust(model->config_);
  const ModelConfig& config = model->config_;
  // The tokenizers before the weights, and what building them freed given back before
  // the weights arrive (below).
  if (config.family == Family::Marian) {
    // The tokenizer description of the family: which files, how pieces become ids.
    bool any = false;
    for (const char* file : kMarianFiles) any |= exists_quietly(directory / file);
    if (any) {
      for (const char* file : kMarianFiles)
        if (!exists_quietly(directory / file))
          throw Error((directory / file).string(), "is missing, and a Marian tokenizer needs it",
                      "a Marian model directory holds source.spm, target.spm and vocab.json together");
      const bool separate = marian_separate_vocabs(directory);
      model->source_tokenizer_ = load_marian_tokenizer(directory / "source.spm", directory / "vocab.json", config);
      model->target_tokenizer_ = load_marian_tokenizer(
          directory / "target.spm", directory / (separate ? "target_vocab.json" : "vocab.json"), config);
    }
  } else if (config.family == Family::T5) {
    model->source_tokenizer_ = model->target_tokenizer_ = load_t5_tokenizer(directory, config);
  } else if (config.family == Family::M2M100) {
    FamilyTokenizer files = load_m2m100_tokenizer(directory, config);
    model->source_tokenizer_ = files.tokenizer;
    model->target_tokenizer_ = files.tokenizer;
    model->languages_ = std::move(files.languages);
    model->special_ids_ = std::move(files.special_ids);
  } else if (exists_quietly(directory / "tokenizer.model")) {
    model->source_tokenizer_ = load_tokenizer(directory / "tokenizer.model",
                                              std::min(config.vocab_size, config.decoder_vocab_size),
                                              "vocab_size");
    model->target_tokenizer_ = model->source_tokenizer_;
  } else if (exists_quietly(directory / "source.model") || exists_quietly(directory / "target.model")) {
    model->source_tokenizer_ = load_tokenizer(directory / "source.model", config.vocab_size, "vocab_size");
    model->target_tokenizer_ =
        load_tokenizer(directory / "target.model", config.decoder_vocab_size, "decoder_vocab_size");
  }
#if defined(__GLIBC__)
  // SentencePiece's parse and trie build free about 100 bytes a piece (3.3 MB for
  // 32,000) between blocks that stay, and glibc keeps such holes resident. The weights
  // live in mappings and would not reuse them: the int4 bench model's peak RSS fell
  // from 64.4 to 61.0 MiB with this.
  malloc_trim(0);
#endif
  model->weights_ = std::make_unique<const WeightStore>(WeightStore::load(directory, model->config_));
  for (const std::string& name : model->weights_->unused())
    if (warn) warn(model->weights_->source() + ": tensor '" + printable(name) + "' is not used by this config (ignored)");
  Transformer transformer = build_transformer(model->config_, *model->weights_);
  // What generation may produce: the decoder's positions, decoder_start taking one.
  const Index positions = std::min<Index>(transformer.decoder.max_steps(), kMaxSequenceLength);
  model->generation_ = read_generation_config(directory, model->config_, positions - (transformer.decoder_only() ? 0 : 1));
  const GenerationConfig& generation = model->generation_;
  if (generation.decoder_start_token_id) transformer.tokens.decoder_start = *generation.decoder_start_token_id;
  if (!generation.eos_token_ids.empty()) {
    transformer.tokens.eos = generation.eos_token_ids.front();
    transformer.tokens.other_eos.assign(generation.eos_token_ids.begin() + 1, generation.eos_token_ids.end());
  }
  model->transformer_ = std::make_unique<const Transformer>(std::move(transformer));
  return model;
}

namespace {

// The files a family reads text with, as its published directories hold them, and the
// flags that take token ids instead: both messages of a model without them name the
// family's own files, so that the advice works (a T5 directory needs spiece.model, not
// tokenizer.model).
struct TokenizerFiles {
  std::string files;
  std::string id_flags;
};

TokenizerFiles tokenizer_files(Family family) {
  const std::string all_ids = "--source-ids, --target-ids, --prompt-ids";
  switch (family) {
    case Family::Marian: return {"source.spm, target.spm and vocab.json", all_ids};
    case Family::T5: return {"spiece.model", all_ids};
    case Family::M2M100: return {"sentencepiece.bpe.model and tokenizer_config.json", "--source-ids, --target-ids"};
    case Family::Llama: return {"tokenizer.model", all_ids};
    case Family::Ordo: return {"tokenizer.model, or source.model + target.model", all_ids};
  }
  return {"tokenizer.model", all_ids};
}

}  // namespace

const Tokenizer& LoadedModel::require(const std::shared_ptr<const Tokenizer>& tokenizer) const {
  if (tokenizer) return *tokenizer;
  const TokenizerFiles needed = tokenizer_files(config_.family);
  if (exists_quietly(directory_ / "tokenizer.json"))
    throw Error(directory_.string(),
                "has only tokenizer.json (Hugging Face tokenizers), and ordo reads the text of a model_type \"" +
                    config_.model_type + "\" directory with SentencePiece: " + needed.files,
                "add the model's " + needed.files + " from its repository, or pass token ids (" + needed.id_flags +
                    ")");
  throw Error(directory_.string(), "has no tokenizer (" + needed.files + ")",
              "pass token ids instead (" + needed.id_flags + ")");
}

std::string LoadedModel::detokenize_source(std::span<const int> ids) const {
  // The encoder reads every id; only the special ones have no text.
  std::vector<int> text_ids;
  for (int id : ids)
    if (id != config_.eos_token_id && id != config_.pad_token_id && !is_special_text_id(id)) text_ids.push_back(id);
  return require(source_tokenizer_).decode(text_ids);
}

std::string LoadedModel::detokenize_target(std::span<const int> ids) const {
  std::vector<int> text_ids;
  const SpecialTokens& tokens = transformer_->tokens;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const int id = ids[i];
    if (i == 0 && tokens.bos && id == *tokens.bos) continue;  // a prompt's bos, which may equal eos (GPT-2)
    if (tokens.is_eos(id)) break;  // what follows eos was never meant
    if (id == tokens.pad || id == tokens.bos || (!transformer_->decoder_only() && id == tokens.decoder_start) ||
        is_special_text_id(id))
      continue;
    text_ids.push_back(id);
  }
  return require(target_tokenizer_).decode(text_ids);
}

bool LoadedModel::is_special_text_id(int id) const {
  return languages_.is_code(id) || std::find(special_ids_.begin(), special_ids_.end(), id) != special_ids_.end();
}

std::vector<std::string> LoadedModel::source_pieces(std::span<const int> ids) const {
  return require(source_tokenizer_).pieces(ids);
}

std::vector<std::string> LoadedModel::target_pieces(std::span<const int> ids) const {
  return require(target_tokenizer_).pieces(ids);
}

}  // namespace ordo
