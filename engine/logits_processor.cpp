#include "engine/logits_processor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "engine/error.h"
#include "engine/ops.h"

namespace ordo {

namespace {

constexpr float kImpossible = -std::numeric_limits<float>::infinity();

// Bans every token that would complete an n-gram already in `generated`: wherever the
// last n-1 tokens occurred before, the token that followed them then is banned now.
void ban_repeated_ngrams(std::span<float> row, std::span<const int> generated, Index n) {
  const Index length = static_cast<Index>(generated.size());
  if (n <= 0 || length < n) return;
  const auto tail = generated.subspan(static_cast<std::size_t>(length - (n - 1)));
  for (Index start = 0; start + n <= length; ++start) {
    const auto earlier = generated.subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(n - 1));
    if (std::ranges::equal(earlier, tail))
      row[static_cast<std::size_t>(generated[static_cast<std::size_t>(start + n - 1)])] = kImpossible;
  }
}

// Bans the last id of every bad sequence whose other ids end `context` (Hugging Face's
// NoBadWordsLogitsProcessor): a one-id sequence always.
void ban_bad_words(std::span<float> row, std::span<const int> context, const std::vector<std::vector<int>>& bad) {
  for (const std::vector<int>& words : bad) {
    const std::size_t before = words.size() - 1;
    if (before > context.size()) continue;
    if (std::equal(words.begin(), words.end() - 1, context.end() - static_cast<std::ptrdiff_t>(before)))
      row[static_cast<std::size_t>(words.back())] = kImpossible;
  }
}

}  // namespace

LogitsProcessor::LogitsProcessor(const DecodingOptions& options, std::span<const int> eos_ids, Index vocab_size)
    : repetition_penalty_(options.repetition_penalty),
      min_length_(options.min_length),
      ngram_(options.no_repeat_ngram_size),
      bad_words_(options.bad_words_ids),
      forced_first_(options.forced_bos_token_id),
      eos_(eos_ids.begin(), eos_ids.end()),
      seen_(static_cast<std::size_t>(vocab_size), 0) {
  const auto check = [&](const char* field, int id) {
    if (id < 0 || id >= vocab_size)
      throw OptionError(field, "id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                   std::to_string(vocab_size) + ")");
  };
  for (const std::vector<int>& words : bad_words_)
    for (const int id : words) check("bad_words_ids", id);
  if (forced_first_ >= 0) check("forced_bos_token_id", forced_first_);
}

void LogitsProcessor::process(std::span<float> row, std::span<const int> context, Index generated) {
  const Index step = generated;
  if (repetition_penalty_ != 1.0) {
    // Once per distinct token, however often it occurred (as CTRL and Hugging Face).
    const auto penalty = static_cast<float>(repetition_penalty_);
    for (const int token : context) {
      auto& seen = seen_[static_cast<std::size_t>(token)];
      if (seen) continue;
      seen = 1;
      float& logit = row[static_cast<std::size_t>(token)];
      logit = logit > 0.0f ? logit / penalty : logit * penalty;
    }
    for (const int token : context) seen_[static_cast<std::size_t>(token)] = 0;
  }

  ops::log_softmax_rows(MatrixRef(row.data(), 1, static_cast<Index>(row.size())));
  bool any_possible = false;  // a row of -inf only would make every choice arbitrary
  for (const float x : row) {
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity())
      throw Error("decoder", "non-finite logits at step " + std::to_string(step),
                  "the model's weights hold NaN or infinity");
    any_possible |= std::isfinite(x);
  }
  if (!any_possible)
    throw Error("decoder", "every token has probability 0 at step " + std::to_string(step),
                "the model's weights hold -infinity");

  // eos may be the min_length-th token at the earliest.
  if (generated + 1 < min_length_)
    for (const int eos : eos_) row[static_cast<std::size_t>(eos)] = kImpossible;
  ban_repeated_ngrams(row, context, ngram_);
  ban_bad_words(row, context, bad_words_);
  if (forced_first_ >= 0 && generated == 0) {
    const float forced = row[static_cast<std::size_t>(forced_first_)];
    std::fill(row.begin(), row.end(), kImpossible);
    row[static_cast<std::size_t>(forced_first_)] = forced;
  }
}

}  // namespace ordo
