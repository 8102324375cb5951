#include "models/loaded_model.h"

#include <iostream>

#include "engine/error.h"
#include "engine/kernel_path.h"
#include "engine/printable.h"
#include "models/build_transformer.h"

namespace ordo {

namespace fs = std::filesystem;

namespace {

// std::filesystem queries without exceptions: an unreadable directory is reported by
// the load that follows, with a message that names the file.
bool is_directory_quietly(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error);
}
bool exists_quietly(const fs::path& path) {
  std::error_code error;
  return fs::exists(path, error);
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
  model->weights_ = std::make_unique<const WeightStore>(WeightStore::load(directory, model->config_));
  for (const std::string& name : model->weights_->unused())
    if (warn) warn(model->weights_->source() + ": tensor '" + printable(name) + "' is not used by this config (ignored)");
  model->transformer_ = std::make_unique<const Transformer>(
      build_transformer(model->config_, *model->weights_));

  const ModelConfig& config = model->config_;
  if (exists_quietly(directory / "tokenizer.model")) {
    model->source_tokenizer_ = load_tokenizer(directory / "tokenizer.model",
                                              std::min(config.vocab_size, config.decoder_vocab_size),
                                              "vocab_size");
    model->target_tokenizer_ = model->source_tokenizer_;
  } else if (exists_quietly(directory / "source.model") || exists_quietly(directory / "target.model")) {
    model->source_tokenizer_ = load_tokenizer(directory / "source.model", config.vocab_size, "vocab_size");
    model->target_tokenizer_ =
        load_tokenizer(directory / "target.model", config.decoder_vocab_size, "decoder_vocab_size");
  }
  return model;
}

const Tokenizer& LoadedModel::require(const std::shared_ptr<const Tokenizer>& tokenizer) const {
  if (tokenizer) return *tokenizer;
  if (exists_quietly(directory_ / "tokenizer.json"))
    throw Error(directory_.string(),
                "has only tokenizer.json (Hugging Face tokenizers), and ordo reads text with a SentencePiece "
                "tokenizer.model",
                "add the model's tokenizer.model, or pass token ids (--prompt-ids, --source-ids, --target-ids)");
  throw Error(directory_.string(), "has no tokenizer (tokenizer.model, or source.model + target.model)",
              "pass token ids instead (--source-ids, --target-ids, --prompt-ids)");
}

std::string LoadedModel::detokenize_source(std::span<const int> ids) const {
  // The encoder reads every id; only the special ones have no text.
  std::vector<int> text_ids;
  for (int id : ids)
    if (id != config_.eos_token_id && id != config_.pad_token_id) text_ids.push_back(id);
  return require(source_tokenizer_).decode(text_ids);
}

std::string LoadedModel::detokenize_target(std::span<const int> ids) const {
  std::vector<int> text_ids;
  const SpecialTokens& tokens = transformer_->tokens;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const int id = ids[i];
    if (i == 0 && tokens.bos && id == *tokens.bos) continue;  // a prompt's bos, which may equal eos (GPT-2)
    if (tokens.is_eos(id)) break;  // what follows eos was never meant
    if (id == tokens.pad || id == tokens.bos || (!transformer_->decoder_only() && id == tokens.decoder_start)) continue;
    text_ids.push_back(id);
  }
  return require(target_tokenizer_).decode(text_ids);
}

std::vector<std::string> LoadedModel::source_pieces(std::span<const int> ids) const {
  return require(source_tokenizer_).pieces(ids);
}

std::vector<std::string> LoadedModel::target_pieces(std::span<const int> ids) const {
  return require(target_tokenizer_).pieces(ids);
}

}  // namespace ordo
