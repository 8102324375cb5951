// A SentencePiece model: text <-> piece ids.
//
// ordo wraps SentencePiece rather than reimplementing it; what the wrapper adds is
// checking at the boundary: empty text and ids outside the vocabulary are errors with
// a message, never undefined behaviour inside the library.
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

  // Text -> ids (no eos; the model appends it). Empty or all-whitespace text throws.
  std::vector<int> encode(std::string_view text) const;
  // Ids -> text. An id outside [0, vocab_size()) throws Error naming it.
  std::string decode(std::span<const int> ids) const;
  // Ids -> their pieces ("▁cat"), for display.
  std::vector<std::string> pieces(std::span<const int> ids) const;

  Index vocab_size() const;
  const std::filesystem::path& path() const { return path_; }

 private:
  Tokenizer();
  void check_ids(std::span<const int> ids) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::filesystem::path path_;
};

}  // namespace ordo
