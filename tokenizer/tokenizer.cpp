#include "tokenizer/tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>

#include "engine/error.h"
#include "engine/regular_file.h"
#include "engine/input_text.h"
#include "engine/printable.h"

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

Tokenizer Tokenizer::load(const std::filesystem::path& path, Mapping mapping) {
  Tokenizer tokenizer = load(path);
  if (mapping.vocabulary) {
    const PieceVocabulary& vocabulary = *mapping.vocabulary;
    const auto& sp = *tokenizer.processor_;
    for (int id = 0; id < sp.GetPieceSize(); ++id) {
      if (sp.IsControl(id) || sp.IsUnknown(id) || sp.IsUnused(id)) continue;
      if (!vocabulary.contains(sp.IdToPiece(id)))
        throw Error(vocabulary.path().string(),
                    "lacks the piece '" + printable(sp.IdToPiece(id)) + "' (id " + std::to_string(id) + " of " +
                        path.filename().string() + ")",
                    "the vocabulary and the SentencePiece model come from two different models");
    }
  }
  tokenizer.mapping_ = std::move(mapping);
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
  if (!mapping_.vocabulary) {
    const auto status = processor_->Encode(text, &ids);
    if (!status.ok()) throw Error(path_.string(), "cannot tokenize the input: " + status.ToString());
    return ids;
  }
  const PieceVocabulary& vocabulary = *mapping_.vocabulary;
  if (mapping_.language_token && text.starts_with(">>")) {
    // As MarianTokenizer: the token runs to the first "<<" (the search starts at 0, so
    // ">><<" is a token too), and it is looked up whole, never split into pieces.
    if (const auto end = text.find("<<"); end != std::string_view::npos) {
      ids.push_back(vocabulary.id(text.substr(0, end + 2)));
      text.remove_prefix(end + 2);
    }
  }
  std::vector<std::string> pieces;
  const auto status = processor_->Encode(text, &pieces);
  if (!status.ok()) throw Error(path_.string(), "cannot tokenize the input: " + status.ToString());
  for (const std::string& piece : pieces) ids.push_back(vocabulary.id(piece));
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

namespace {

std::string strip_spaces(const std::string& text) {
  static constexpr std::string_view kSpaces = " \t\n\r\f\v";
  const auto first = text.find_first_not_of(kSpaces);
  return first == std::string::npos ? std::string() : text.substr(first, text.find_last_not_of(kSpaces) - first + 1);
}

}  // namespace

std::string Tokenizer::decode(std::span<const int> ids) const {
  check_ids(ids);
  std::string text;
  const int pieces = processor_->GetPieceSize();
  if (mapping_.extra_ids > 0 && std::ranges::any_of(ids, [&](int id) { return id >= pieces; })) {
    // As T5Tokenizer's convert_tokens_to_string: a sentinel is a special token, put
    // after the text before it (a space first unless a special token precedes), the
    // runs between decoded by the SentencePiece model, the ends stripped.
    std::vector<int> run;
    bool after_special = false;
    const auto flush = [&] {
      std::string part;
      const auto status = processor_->Decode(run, &part);
      if (!status.ok()) throw Error(path_.string(), "cannot decode ids: " + status.ToString());
      run.clear();
      return part;
    };
    for (const int id : ids) {
      if (id < pieces) {
        run.push_back(id);
        after_special = false;
        continue;
      }
      if (!after_special) text += ' ';
      text += flush() + pieces_of_ids(std::span<const int>(&id, 1)).front();
      after_special = true;
    }
    return strip_spaces(text + flush());
  }
  const auto status = mapping_.vocabulary ? processor_->Decode(pieces_of_ids(ids), &text)
                                          : processor_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) throw Error(path_.string(), "cannot decode ids: " + status.ToString());
  if (mapping_.vocabulary) {
    // As MarianTokenizer's convert_tokens_to_string: a piece the SentencePiece model lacks
    // (a shared vocabulary holds the other side's pieces too) comes out verbatim, so its
    // word-start marks become spaces, and the ends are stripped.
    static constexpr std::string_view kMark = "\xe2\x96\x81";  // U+2581
    static constexpr std::string_view kSpaces = " \t\n\r\f\v";
    std::string spaced;  // built anew: std::string::replace trips g++ 12's bogus -Wrestrict
    for (std::size_t at = 0; at < text.size();) {
      const bool mark = std::string_view(text).substr(at, kMark.size()) == kMark;
      spaced += mark ? ' ' : text[at];
      at += mark ? kMark.size() : 1;
    }
    const auto first = spaced.find_first_not_of(kSpaces);
    text = first == std::string::npos ? std::string() : spaced.substr(first, spaced.find_last_not_of(kSpaces) - first + 1);
  }
  return text;
}

std::vector<std::string> Tokenizer::pieces_of_ids(std::span<const int> ids) const {
  std::vector<std::string> result;
  result.reserve(ids.size());
  const int sentinel_end = processor_->GetPieceSize() + mapping_.extra_ids;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!mapping_.vocabulary && ids[i] >= processor_->GetPieceSize()) {  // a T5 sentinel
      result.push_back("<extra_id_" + std::to_string(sentinel_end - 1 - ids[i]) + ">");
      continue;
    }
    if (!mapping_.vocabulary) {
      result.push_back(processor_->IdToPiece(ids[i]));
      continue;
    }
    const std::string* piece = mapping_.vocabulary->piece(ids[i]);
    if (piece == nullptr)
      throw Error(mapping_.vocabulary->path().string(), "has no piece with the id " + std::to_string(ids[i]) +
                                                            " (at position " + std::to_string(i) + ")");
    result.push_back(*piece);
  }
  return result;
}

std::vector<std::string> Tokenizer::pieces(std::span<const int> ids) const {
  check_ids(ids);
  return pieces_of_ids(ids);
}

std::vector<std::string> Tokenizer::model_pieces() const {
  std::vector<std::string> pieces;
  pieces.reserve(static_cast<std::size_t>(processor_->GetPieceSize()));
  for (int id = 0; id < processor_->GetPieceSize(); ++id) pieces.push_back(processor_->IdToPiece(id));
  return pieces;
}

Index Tokenizer::vocab_size() const {
  return mapping_.vocabulary ? mapping_.vocabulary->id_bound() : processor_->GetPieceSize() + mapping_.extra_ids;
}

int Tokenizer::piece_id(std::string_view piece) const {
  const int id = processor_->PieceToId(piece);
  // SentencePiece answers the unknown piece's id for a piece it lacks.
  return processor_->IdToPiece(id) == piece ? id : -1;
}

}  // namespace ordo
