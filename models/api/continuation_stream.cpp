#include "models/api/continuation_stream.h"

#include <algorithm>

namespace ordo::detail {

namespace {

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// The ids before the first eos: what a continuation's text is made of.
std::span<const int> until_eos(const SpecialTokens& tokens, std::span<const int> ids) {
  const auto end = std::find_if(ids.begin(), ids.end(), [&](int id) { return tokens.is_eos(id); });
  return ids.first(static_cast<std::size_t>(end - ids.begin()));
}

}  // namespace

std::string continuation_text(const LoadedModel& model, std::span<const int> prompt, std::span<const int> generated) {
  const std::span<const int> kept = until_eos(model.transformer().tokens, generated);
  if (kept.empty()) return "";
  // Decoded in context, so that the space a word piece carries ("▁Hund") shows up
  // between the prompt and the continuation; the prompt's own text is then cut off.
  std::vector<int> all(prompt.begin(), prompt.end());
  all.insert(all.end(), kept.begin(), kept.end());
  const std::string whole = model.detokenize_target(all);
  const std::string before = model.detokenize_target(prompt);
  if (whole.starts_with(before)) return whole.substr(before.size());
  return model.detokenize_target(kept);  // the pieces merged across the boundary
}

std::string ContinuationStream::add(int token, bool last) {
  ids_.push_back(token);
  const std::string decoded = continuation_text(model_, prompt_, ids_);
  std::string_view text = decoded;
  if (!last)
    while (text.ends_with(kReplacementCharacter)) text.remove_suffix(kReplacementCharacter.size());
  return take(text);
}

std::string ContinuationStream::take(std::string_view text) {
  if (text.size() <= shown_.size() || !text.starts_with(shown_)) return "";
  std::string added(text.substr(shown_.size()));
  shown_ = text;
  return added;
}

}  // namespace ordo::detail
