#include "tokenizer/piece_vocabulary.h"

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/printable.h"
#include "engine/regular_file.h"
#include "models/json_message.h"

namespace ordo {

PieceVocabulary PieceVocabulary::load(const std::filesystem::path& path, const std::string& unknown_piece) {
  // opus-mt's vocab.json holds ~60,000 pieces in ~1.5 MB; the largest vocabularies
  // (256,000 pieces) stay far below this.
  constexpr std::uint64_t kMaxBytes = 64u << 20;
  const std::string where = path.string();
  const std::string text = read_regular_file(path, kMaxBytes, "a vocabulary (vocab.json)");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text, json_depth_limit(where));
  } catch (const nlohmann::json::exception& e) {
    throw Error(where, "not valid JSON: " + json_message(e.what()));
  }
  if (!json.is_object())
    throw Error(where, "expected a JSON object {piece: id}, got " + json_excerpt(json),
                "vocab.json maps each SentencePiece piece to its id in the model");
  PieceVocabulary vocabulary;
  vocabulary.path_ = path;
  for (const auto& [piece, value] : json.items()) {
    if (!value.is_number_integer())
      throw Error(where, "piece '" + printable(piece) + "' has the id " + json_excerpt(value) + ", not an integer");
    const auto id = value.get<std::int64_t>();
    if (id < 0 || id >= kMaxVocabularyIds)
      throw Error(where, "piece '" + printable(piece) + "' has the id " + std::to_string(id) + ", outside [0, " +
                             std::to_string(kMaxVocabularyIds) + ")");
    const auto index = static_cast<std::size_t>(id);
    if (index >= vocabulary.pieces_.size()) {
      vocabulary.pieces_.resize(index + 1);
      vocabulary.present_.resize(index + 1, false);
    }
    // Two pieces with one id could not be told apart when ids become text again.
    if (vocabulary.present_[index])
      throw Error(where, "pieces '" + printable(vocabulary.pieces_[index]) + "' and '" + printable(piece) +
                             "' have the same id " + std::to_string(id),
                  "each id is one row of the embedding; the file is damaged");
    vocabulary.pieces_[index] = piece;
    vocabulary.present_[index] = true;
    vocabulary.ids_.emplace(piece, static_cast<int>(id));
  }
  const auto unknown = vocabulary.ids_.find(unknown_piece);
  if (unknown == vocabulary.ids_.end())
    throw Error(where, "has no '" + unknown_piece + "' piece, which unknown pieces become",
                "a Marian vocab.json always holds <unk>; is this the model's own file?");
  vocabulary.unknown_id_ = unknown->second;
  return vocabulary;
}

PieceVocabulary PieceVocabulary::from_pieces(const std::filesystem::path& path, std::vector<std::string> by_id,
                                             int unknown_id) {
  PieceVocabulary vocabulary;
  vocabulary.path_ = path;
  vocabulary.present_.resize(by_id.size(), false);
  for (std::size_t id = 0; id < by_id.size(); ++id) {
    if (by_id[id].empty()) continue;
    vocabulary.present_[id] = true;
    vocabulary.ids_.insert_or_assign(by_id[id], static_cast<int>(id));
  }
  vocabulary.pieces_ = std::move(by_id);
  if (unknown_id < 0 || unknown_id >= vocabulary.id_bound() || !vocabulary.present_[static_cast<std::size_t>(unknown_id)])
    throw Error(path.string(), "has no piece with the id " + std::to_string(unknown_id) + ", which unknown pieces become");
  vocabulary.unknown_id_ = unknown_id;
  return vocabulary;
}

int PieceVocabulary::id(std::string_view piece) const {
  const auto found = ids_.find(std::string(piece));
  return found == ids_.end() ? unknown_id_ : found->second;
}

const std::string* PieceVocabulary::piece(int id) const {
  if (id < 0 || id >= id_bound() || !present_[static_cast<std::size_t>(id)]) return nullptr;
  return &pieces_[static_cast<std::size_t>(id)];
}

}  // namespace ordo
