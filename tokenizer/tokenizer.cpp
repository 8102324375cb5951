#include "tokenizer/tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>

#include "engine/error.h"
#include "engine/regular_file.h"
#include "engine/input_text.h"

namespace ordo {

Tokenizer::Tokenizer() : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
  // The largest SentencePiece models (256,000 pieces) are a few MB.
  constexpr std::uint64_t kMaxModelBytes = 256u << 20;
  const std::string bytes = read_regular_file(path, kMaxModelBytes, "a SentencePiece model");
  Tokenizer tokenizer;
  tokenizer.path_ = path;
  // SentencePiece's own status names its source file and line: say what it means.
  if (!tokenizer.processor_->LoadFromSerializedProto(bytes).ok())
    throw Error(path.string(), "is not a SentencePiece model (it does not parse as one)",
                "a tokenizer.model comes from spm_train; is this file damaged or something else?");
  return tokenizer;
}

namespace {

// A window cut inside a word (a text with no space near the cut) may change the pieces
// next to the cut; a window is trusted only when it gives this many ids beyond the ones
// kept, so that those pieces are not among them.
constexpr std::size_t kInsideWordMargin = 16;

// The first window holds about this many bytes per wanted id: English text averages 4-6
// bytes a piece, so one window is nearly always enough.
constexpr std::size_t kBytesPerId = 8;

void check_text(std::string_view text) {
  check_input_text(text);
  if (is_blank(text)) throw Error("input text", "is empty", "give some text");
}

}  // namespace

std::vector<int> Tokenizer::encode_unchecked(std::string_view text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  if (!status.ok()) throw Error(path_.string(), "cannot tokenize the input: " + status.ToString());
  return ids;
}

std::vector<int> Tokenizer::encode(std::string_view text) const {
  check_text(text);
  std::vector<int> ids = encode_unchecked(text);
  // Characters the normalizer drops (format characters, say) can leave nothing to read.
  if (ids.empty()) throw Error("input text", "gives no tokens", "it holds only characters the tokenizer drops");
  return ids;
}

Tokenizer::Bounded Tokenizer::encode_bounded(std::string_view text, Index max_ids, Keep keep) const {
  if (max_ids < 0) throw Error("encode_bounded", "max_ids must be >= 0, got " + std::to_string(max_ids));
  check_text(text);
  const auto wanted = static_cast<std::size_t>(max_ids);
  Bounded result;
  for (std::size_t window = std::max<std::size_t>(1024, (wanted + kInsideWordMargin + 1) * kBytesPerId);;
       window *= 2) {
    if (window >= text.size()) {
      result.ids = encode(text);
      break;
    }
    bool inside_word = false;
    const std::string_view part = keep == Keep::Start
                                      ? text.substr(0, cut_before(text, window, inside_word))
                                      : text.substr(cut_after(text, text.size() - window, inside_word));
    result.ids = encode_unchecked(part);
    if (result.ids.size() > wanted + (inside_word ? kInsideWordMargin : 0)) break;
  }
  if (result.ids.size() > wanted) {
    result.more = true;
    if (keep == Keep::Start)
      result.ids.resize(wanted);
    else
      result.ids.erase(result.ids.begin(), result.ids.end() - static_cast<std::ptrdiff_t>(wanted));
  }
  return result;
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
