// A piece -> id map that replaces a SentencePiece model's own ids: Marian's vocab.json
// (and target_vocab.json), whose ids are the rows of the model's embedding, not the
// positions of the pieces in source.spm / target.spm (the vocabulary of a shared
// model is the union of both sides' pieces, in Marian's own order).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ordo {

class PieceVocabulary {
 public:
  // Reads a JSON object {piece: id}. Throws Error naming the file when it is not one,
  // when an id is negative, too large (kMaxVocabularyIds) or given to two pieces, or
  // when there is no `unknown_piece` (what unknown pieces become).
  static PieceVocabulary load(const std::filesystem::path& path, const std::string& unknown_piece);
  // A vocabulary built from pieces by id (NLLB's: the SentencePiece pieces shifted by
  // fairseq's offset, the special tokens and language codes around them); "" marks an
  // id no piece has. A piece listed twice keeps its later id for encoding (an added
  // token wins over a SentencePiece piece, as in transformers). `path` names it in
  // messages; `unknown_id` (a present id) is what unknown pieces become. Throws Error
  // when `unknown_id` has no piece.
  static PieceVocabulary from_pieces(const std::filesystem::path& path, std::vector<std::string> by_id,
                                     int unknown_id);

  // The id of a piece; the unknown piece's id for a piece the vocabulary lacks.
  int id(std::string_view piece) const;
  bool contains(std::string_view piece) const { return ids_.contains(std::string(piece)); }
  // The piece of an id; nullptr when no piece has it (ids may have holes).
  const std::string* piece(int id) const;
  // One more than the largest id: the embedding rows the vocabulary needs.
  int id_bound() const { return static_cast<int>(pieces_.size()); }
  std::size_t size() const { return ids_.size(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::unordered_map<std::string, int> ids_;
  std::vector<std::string> pieces_;  // by id; "" where no piece has the id
  std::vector<bool> present_;        // by id
  int unknown_id_ = 0;
};

// Ids are embedding rows: ordo's bound on a vocabulary size (models/config_reader.h).
inline constexpr int kMaxVocabularyIds = 1 << 24;

}  // namespace ordo
