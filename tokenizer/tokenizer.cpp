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
  if (!std::filesystem::is_regular_file(path, error))
    throw Error(path.string(), "no such SentencePiece model file");
  Tokenizer tokenizer;
  tokenizer.path_ = path;
  const auto status = tokenizer.processor_->Load(path.string());
  if (!status.ok())
    throw Error(path.string(), "not a valid SentencePiece model: " + status.ToString());
  return tokenizer;
}

std::vector<int> Tokenizer::encode(std::string_view text) const {
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
