// libFuzzer target: the Hugging Face side files of a model directory, four in one input
// (kFileSeparator between them): vocab.json (Marian's piece -> id map), generation_config.json
// (a checkpoint's decoding defaults, read against the shipped Marian model's config and
// german-llama's), tokenizer_config.json and special_tokens_map.json (NLLB's tokenizer
// description, read with the shipped SentencePiece model as sentencepiece.bpe.model).
// A refusal is ordo::Error; what loads must answer consistently: each id of a vocabulary
// maps to its piece and back, and each language code is its own id's code.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "models/config.h"
#include "models/generation_config.h"
#include "models/nllb_tokenizer.h"
#include "tests/fuzz/fuzz_support.h"
#include "tokenizer/piece_vocabulary.h"

namespace {

namespace fs = std::filesystem;

void check_vocabulary(const fs::path& path) {
  std::optional<ordo::PieceVocabulary> vocabulary;
  ordo::fuzz::refusal_is_fine([&] { vocabulary = ordo::PieceVocabulary::load(path, "<unk>"); });
  if (!vocabulary) return;
  for (int id = 0; id < vocabulary->id_bound(); ++id) {
    const std::string* piece = vocabulary->piece(id);
    if (piece != nullptr && vocabulary->id(*piece) != id) {
      std::fprintf(stderr, "vocab.json: id %d's piece maps to id %d\n", id, vocabulary->id(*piece));
      __builtin_trap();
    }
  }
}

void check_languages(const fs::path& directory, const ordo::ModelConfig& config) {
  std::optional<ordo::FamilyTokenizer> tokenizer;
  ordo::fuzz::refusal_is_fine([&] { tokenizer = ordo::load_m2m100_tokenizer(directory, config); });
  if (!tokenizer) return;
  const ordo::LanguageCodes& languages = tokenizer->languages;
  for (std::size_t i = 0; i < languages.codes.size(); ++i)
    if (languages.id(languages.codes[i]) != languages.ids[i] || !languages.is_code(languages.ids[i])) {
      std::fprintf(stderr, "tokenizer_config.json: language code %zu is not its id's code\n", i);
      __builtin_trap();
    }
  (void)languages.listed();
  if (tokenizer->tokenizer) (void)tokenizer->tokenizer->encode("cats chase dogs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ordo::ModelConfig marian = ordo::ModelConfig::load(ORDO_SOURCE_DIR "/weights/marian/config.json");
  static const ordo::ModelConfig llama = ordo::ModelConfig::load(ORDO_SOURCE_DIR "/weights/german-llama/config.json");
  // NLLB-200's config (a vocab_size that leaves room for any number of language codes).
  static const ordo::ModelConfig nllb = ordo::ModelConfig::load(ORDO_SOURCE_DIR "/tests/fuzz/corpus/config/m2m100");
  const auto parts = ordo::fuzz::split_files(ordo::fuzz::as_text(data, size));
  const fs::path& dir = ordo::fuzz::fresh_directory();
  const char* names[] = {"vocab.json", "generation_config.json", "tokenizer_config.json", "special_tokens_map.json"};
  for (std::size_t i = 0; i < parts.size() && i < std::size(names); ++i)
    ordo::fuzz::write_file(dir / names[i], parts[i]);

  check_vocabulary(dir / "vocab.json");
  for (const ordo::ModelConfig* config : {&marian, &llama})
    ordo::fuzz::refusal_is_fine([&] { (void)ordo::read_generation_config(dir, *config, 100); });
  fs::copy_file(ORDO_SOURCE_DIR "/weights/tokenizer.model", dir / "sentencepiece.bpe.model");
  check_languages(dir, nllb);
  return 0;
}
