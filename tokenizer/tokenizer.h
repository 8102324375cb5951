// A SentencePiece model: text <-> piece ids.
//
// ordo wraps SentencePiece rather than reimplementing it; what the wrapper adds is
// checking at the boundary: text that breaks ordo's input rule (ordo/text.hpp:
// UTF-8 without control characters), empty text and ids outside the vocabulary are
// errors with a message, never undefined behaviour inside the library; and a bound on
// the work a long text costs (encode_bounded).
//
// A family may map pieces to ids through a vocabulary of its own (Marian's vocab.json,
// tokenizer/piece_vocabulary.h) instead of the SentencePiece model's ids, and may read a
// leading language token (">>deu<<", multilingual opus-mt) as one token of that
// vocabulary, as MarianTokenizer does.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tensor.h"
#include "tokenizer/piece_vocabulary.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace ordo {

class Tokenizer {
 public:
  // Throws Error naming the file when it is missing or not a SentencePiece model.
  static Tokenizer load(const std::filesystem::path& path);

  // How text becomes ids beyond the SentencePiece model: Marian's tokenizer.
  struct Mapping {
    // Pieces become ids through this map (unknown pieces: its unknown piece's id), and
    // ids pieces again through it. Every normal piece of the SentencePiece model must
    // be in it (else Error naming the first missing one: the files are of two models).
    std::shared_ptr<const PieceVocabulary> vocabulary;
    // A text starting ">>" up to the first "<<" ("">>fra<< ...") begins with that
    // language token, one id of the vocabulary; the rest is tokenized as usual.
    bool language_token = false;
    // T5Tokenizer's sentinels: ids [pieces, pieces + extra_ids) after the SentencePiece
    // model's own are "<extra_id_N>", N counting down from the last id (the last is
    // <extra_id_0>). They are read as ids and shown and decoded as those names; text
    // is not searched for them. Only without a vocabulary.
    int extra_ids = 0;
  };
  static Tokenizer load(const std::filesystem::path& path, Mapping mapping);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text -> ids (no eos; the model appends it). Throws Error when the text breaks the
  // input rule (check_input_text), is blank, or gives no ids at all.
  std::vector<int> encode(std::string_view text) const;

  // Which end of a long text encode_bounded keeps.
  enum class Keep { Start, End };
  struct Bounded {
    std::vector<int> ids;  // at most max_ids
    bool more = false;     // encode(text) gives more than max_ids ids
  };
  // The first (Keep::Start) or last (Keep::End) max_ids ids of encode(text), and whether
  // there are more, tokenizing only about as much of the text as those ids need: a
  // window of the text, cut at a space, doubled until it gives more than max_ids ids or
  // is the whole text. A 10 MB line then costs what its first few thousand tokens cost,
  // where encode() would hold millions of ids. The whole text is still checked against
  // the input rule. Throws as encode() does.
  Bounded encode_bounded(std::string_view text, Index max_ids, Keep keep) const;
  // Ids -> text. An id outside [0, vocab_size()) throws Error naming it.
  std::string decode(std::span<const int> ids) const;
  // Ids -> their pieces ("▁cat"), for display.
  std::vector<std::string> pieces(std::span<const int> ids) const;

  // The SentencePiece model's own pieces, by its own ids (whatever the mapping): what a
  // family's vocabulary is built from (NLLB's, shifted by fairseq's offset).
  std::vector<std::string> model_pieces() const;

  // Ids this tokenizer gives or reads: [0, vocab_size()) (with a vocabulary: one more
  // than its largest id; with extra ids, the pieces and those).
  Index vocab_size() const;
  // The SentencePiece model's own id of a piece, or -1 when it has no such piece.
  int piece_id(std::string_view piece) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  Tokenizer();
  void check_ids(std::span<const int> ids) const;
  std::vector<int> encode_unchecked(std::string_view text) const;
  std::vector<std::string> pieces_of_ids(std::span<const int> ids) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::filesystem::path path_;
  Mapping mapping_;
};

}  // namespace ordo
