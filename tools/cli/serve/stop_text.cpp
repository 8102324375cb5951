#include "tools/cli/serve/stop_text.h"

#include <algorithm>

namespace ordo::tools::serve {

StopText::StopText(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const std::string& s : stops_) longest_ = std::max(longest_, s.size());
}

std::string StopText::feed(std::string_view piece) {
  if (stopped_) return {};
  text_ += piece;
  // A stop sequence not found before could only end in the new text: search from where
  // one that long would start.
  const std::size_t from = shown_.size() > longest_ ? shown_.size() - longest_ : 0;
  std::size_t cut = std::string::npos;
  for (const std::string& stop : stops_) cut = std::min(cut, text_.find(stop, from));
  std::size_t safe;
  if (cut != std::string::npos) {
    stopped_ = true;
    text_.resize(cut);
    safe = cut;
  } else {
    // Hold back what could be the start of a stop sequence, never splitting a UTF-8
    // character.
    safe = text_.size() >= longest_ ? text_.size() - (longest_ > 0 ? longest_ - 1 : 0) : 0;
    while (safe > shown_.size() && safe < text_.size() && (static_cast<unsigned char>(text_[safe]) & 0xC0) == 0x80)
      --safe;
  }
  if (safe <= shown_.size()) return {};
  std::string out = text_.substr(shown_.size(), safe - shown_.size());
  shown_ += out;
  return out;
}

std::string StopText::flush() {
  if (stopped_ || shown_.size() >= text_.size()) return {};
  std::string out = text_.substr(shown_.size());
  shown_ = text_;
  return out;
}

}  // namespace ordo::tools::serve
