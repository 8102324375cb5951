// A continuation's text: what the generated ids add after a prompt, whole or token by
// token as they stream (Generator, ContinuousBatch). Not installed.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/loaded_model.h"

namespace ordo::detail {

// The text `generated` adds after `prompt` (leading space included), both in ids; the
// ids from the first eos on add nothing.
std::string continuation_text(const LoadedModel& model, std::span<const int> prompt, std::span<const int> generated);

// A continuation's text as it grows token by token, for streaming: after each token,
// the text it adds. A byte piece that begins a character (byte-fallback tokenizers)
// decodes as U+FFFD until the rest of the character arrives, so a trailing one is held
// back and comes with the token that completes it. `prompt` must outlive the stream.
class ContinuationStream {
 public:
  ContinuationStream(const LoadedModel& model, std::span<const int> prompt) : model_(model), prompt_(prompt) {}

  // The text `token` adds (often one word piece, possibly nothing). `last`: no token
  // follows, so nothing is held back.
  std::string add(int token, bool last);

  // What `text` (the continuation's final text) holds beyond what was reported.
  std::string rest(std::string_view text) { return take(text); }

 private:
  // Pieces only ever extend the text: report what is new.
  std::string take(std::string_view text);

  const LoadedModel& model_;
  std::span<const int> prompt_;
  std::vector<int> ids_;
  std::string shown_;
};

}  // namespace ordo::detail
