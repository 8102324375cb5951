// OpenAI's "stop": a completion ends before the first of up to 4 sequences. StopText
// takes the continuation piece by piece as it is generated and hands back only text
// that can no longer turn out to begin a stop sequence, so that a stream never shows
// what the finished completion does not contain.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ordo::tools::serve {

class StopText {
 public:
  explicit StopText(std::vector<std::string> stops);

  // Adds a piece; returns the text now safe to show (possibly empty). After a stop
  // sequence is found, returns the text before it and then nothing.
  std::string feed(std::string_view piece);
  // At the end of the continuation: what was held back (nothing once stopped).
  std::string flush();
  // True once a stop sequence was found.
  bool stopped() const noexcept { return stopped_; }
  // The text shown so far (feed's and flush's returns, joined).
  const std::string& shown() const noexcept { return shown_; }

 private:
  std::vector<std::string> stops_;
  std::size_t longest_ = 0;
  std::string text_;    // everything fed (cut at a stop sequence once found)
  std::string shown_;   // text_'s prefix already returned
  bool stopped_ = false;
};

}  // namespace ordo::tools::serve
