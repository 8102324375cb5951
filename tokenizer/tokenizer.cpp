#include "tokenizer/tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cctype>

#include "engine/error.h"

namespace ordo {

Tokenizer::Tokenizer() : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error))
    throw Error(path.string(), "no such SentencePiece model file");
  if (!std::filesystem::is_regular_file(path, error))
    throw Error(path.string(), "is not a regular file", "a tokenizer.model is a SentencePiece model file");
  Tokenizer tokenizer;
  tokenizer.path_ = path;
  // SentencePiece's own status names its source file and line: say what it means.
  if (!tokenizer.processor_->Load(path.string()).ok())
    throw Error(path.string(), "is not a SentencePiece model (it does not parse as one)",
                "a tokenizer.model comes from spm_train; is this file damaged or something else?");
  return tokenizer;
}

namespace {

// The byte offset of the first byte that breaks UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), or npos when the text is valid.
std::size_t invalid_utf8_at(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char c = byte(i);
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
    if (c < 0x80) length = 1;
    else if (c >= 0xC2 && c <= 0xDF) length = 2;
    else if (c == 0xE0) length = 3, low = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) length = 3;
    else if (c == 0xED) length = 3, high = 0x9F;
    else if (c == 0xF0) length = 4, low = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) length = 4;
    else if (c == 0xF4) length = 4, high = 0x8F;
    else return i;
    if (i + length > text.size()) return i;
    for (std::size_t k = 1; k < length; ++k) {
      const unsigned char next = byte(i + k);
      if (k == 1 ? (next < low || next > high) : (next < 0x80 || next > 0xBF)) return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

}  // namespace

std::vector<int> Tokenizer::encode(std::string_view text) const {
  // SentencePiece would quietly turn bad bytes into U+FFFD and translate what is left.
  if (const std::size_t at = invalid_utf8_at(text); at != std::string_view::npos)
    throw Error("input text", "is not valid UTF-8 (byte " + std::to_string(at) + ")",
                "convert the input to UTF-8, e.g. with iconv");
  const bool blank = std::all_of(text.begin(), text.end(),
                                 [](unsigned char c) { return std::isspace(c) != 0; });
  if (blank) throw Error("input text", "is empty", "give a sentence to translate");
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  if (!status.ok()) throw Error(path_.string(), "cannot tokenize the input: " + status.ToString());
  return ids;
}

void Tokenizer::check_ids(std::span<const int> ids) const {
  const Index size = vocab_size();
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= size)
      throw Error(path_.string(), "id " + std::to_string(ids[i]) + " at position " +
                                      std::to_string(i) + " is outside the vocabulary [0, " +
                                      std::to_string(size) + ")");
}

std::string Tokenizer::decode(std::span<const int> ids) const {
  check_ids(ids);
  std::string text;
  const auto status = processor_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) throw Error(path_.string(), "cannot decode ids: " + status.ToString());
  return text;
}

std::vector<std::string> Tokenizer::pieces(std::span<const int> ids) const {
  check_ids(ids);
  std::vector<std::string> result;
  result.reserve(ids.size());
  for (int id : ids) result.push_back(processor_->IdToPiece(id));
  return result;
}

Index Tokenizer::vocab_size() const { return processor_->GetPieceSize(); }

}  // namespace ordo
