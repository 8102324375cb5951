#include "models/t5_tokenizer.h"

#include <tuple>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/regular_file.h"
#include "models/config_reader.h"
#include "models/json_file.h"
#include "models/json_message.h"

namespace ordo {

namespace fs = std::filesystem;

namespace {

constexpr int kDefaultExtraIds = 100;  // T5Tokenizer's

// tokenizer_config.json's extra_ids, as T5Tokenizer reads it.
int extra_ids(const fs::path& directory) {
  const fs::path path = directory / "tokenizer_config.json";
  if (!exists_quietly(path)) return kDefaultExtraIds;
  constexpr std::uint64_t kMaxBytes = 16u << 20;
  const nlohmann::json json = read_json_object(path, kMaxBytes, "a tokenizer_config.json");
  const auto found = json.find("extra_ids");
  if (found == json.end() || found->is_null()) return kDefaultExtraIds;
  if (!found->is_number_integer() || found->get<std::int64_t>() < 0 ||
      found->get<std::int64_t>() > config_reader::kMaxSize)
    throw Error(path.string() + ": key 'extra_ids'", "expected a non-negative integer, got " + json_excerpt(*found));
  return static_cast<int>(found->get<std::int64_t>());
}

}  // namespace

std::shared_ptr<const Tokenizer> load_t5_tokenizer(const fs::path& directory, const ModelConfig& config) {
  const fs::path path = directory / "spiece.model";
  if (!exists_quietly(path)) return nullptr;
  const int extra = extra_ids(directory);
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::load(path, Tokenizer::Mapping{nullptr, false, extra}));
  const Index pieces = tokenizer->vocab_size() - extra;
  if (tokenizer->vocab_size() > config.vocab_size)
    throw Error(path.string(),
                "has " + std::to_string(pieces) + " pieces, and with " + std::to_string(extra) +
                    " sentinels (tokenizer_config.json's extra_ids" +
                    (exists_quietly(directory / "tokenizer_config.json") ? "" : ", T5Tokenizer's default") +
                    ") that is more than config.json's vocab_size=" + std::to_string(config.vocab_size),
                "the tokenizer and the model come from two different checkpoints");
  for (const auto& [piece, key, id] : {std::tuple{"</s>", "eos_token_id", config.eos_token_id},
                                       std::tuple{"<pad>", "pad_token_id", config.pad_token_id}}) {
    const int own = tokenizer->piece_id(piece);
    if (own != id)
      throw Error(path.string(),
                  own < 0 ? std::string("has no '") + piece + "' piece (config.json's " + key + "=" + std::to_string(id) + ")"
                          : std::string("gives '") + piece + "' the id " + std::to_string(own) + ", but config.json's " +
                                key + " is " + std::to_string(id),
                  "spiece.model and config.json belong to different models");
  }
  return tokenizer;
}

}  // namespace ordo
