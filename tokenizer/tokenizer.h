// A SentencePiece model: text <-> piece ids.
//
// ordo wraps SentencePiece rather than reimplementing it; what the wrapper adds is
// checking at the boundary: text that breaks ordo's input rule (ordo/text.hpp:
// UTF-8 without control characters), empty text and ids outside the vocabulary are
// errors with a message, never undefined behaviour inside the library; and a bound on
// the work a long text costs (encode_bounded).
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tensor.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace ordo {

class Tokenizer {
 public:
  // Throws Error naming the file when it is missing or not a SentencePiece model.
  static Tokenizer load(const std::filesystem::path& path);

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

  Index vocab_size() const;
  const std::filesystem::path& path() const { return path_; }

 private:
  Tokenizer();
  void check_ids(std::span<const int> ids) const;
  std::vector<int> encode_unchecked(std::string_view text) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::filesystem::path path_;
};

}  // namespace ordo
