#include "engine/decoding_options.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "engine/decoder.h"
#include "engine/error.h"
#include "engine/limits.h"

namespace ordo {

namespace {

// 0.5 -> "0.5", 1e-40 -> "1e-40" (not "0"), 100 -> "100".
std::string str(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", x);
  return text;
}

}  // namespace

void DecodingOptions::validate() const {
  if (beam_size < 1) throw OptionError("beam_size", "must be at least 1 (1: greedy), got " + std::to_string(beam_size));
  if (beam_size > 1024) throw OptionError("beam_size", "must be at most 1024, got " + std::to_string(beam_size));
  if (n_best < 1) throw OptionError("n_best", "must be at least 1, got " + std::to_string(n_best));
  if (n_best > beam_size)
    throw OptionError("n_best", std::to_string(n_best) + " is more than the beam size " + std::to_string(beam_size) +
                                    " (a search cannot return more hypotheses than it keeps; raise the beam size)");
  if (!std::isfinite(length_penalty))
    throw OptionError("length_penalty", "must be a finite number, got " + str(length_penalty));
  if (max_length < 0) throw OptionError("max_length", "must be >= 0 (0: automatic), got " + std::to_string(max_length));
  if (max_length > kMaxSequenceLength)
    throw OptionError("max_length", std::to_string(max_length) + " is more than ordo's limit of " +
                                        std::to_string(kMaxSequenceLength) + " target tokens");
  if (min_length < 0) throw OptionError("min_length", "must be >= 0 (0: no minimum), got " + std::to_string(min_length));
  if (max_length > 0 && min_length > max_length)
    throw OptionError("min_length", std::to_string(min_length) + " is more than the maximum length, " +
                                        std::to_string(max_length));
  if (no_repeat_ngram_size < 0)
    throw OptionError("no_repeat_ngram_size", "must be >= 0 (0: off), got " + std::to_string(no_repeat_ngram_size));
  if (!(repetition_penalty >= kMinRepetitionPenalty && repetition_penalty <= kMaxRepetitionPenalty))
    throw OptionError("repetition_penalty", "must be in [" + str(kMinRepetitionPenalty) + ", " +
                                                str(kMaxRepetitionPenalty) + "] (1: off; 1.1 to 1.5 are usual), got " +
                                                str(repetition_penalty));
  if (!(temperature > 0.0) || !std::isfinite(temperature))
    throw OptionError("temperature", "must be a positive number, got " + str(temperature) +
                                         " (for the most likely token, use greedy search: no sampling)");
  if (top_k < 0) throw OptionError("top_k", "must be >= 0 (0: off), got " + std::to_string(top_k));
  if (!(top_p > 0.0 && top_p <= 1.0)) throw OptionError("top_p", "must be in (0, 1], got " + str(top_p));
  for (std::size_t i = 0; i < bad_words_ids.size(); ++i) {
    if (bad_words_ids[i].empty())
      throw OptionError("bad_words_ids", "entry " + std::to_string(i) + " is empty (give the ids of a token sequence)");
    for (const int id : bad_words_ids[i])
      if (id < 0) throw OptionError("bad_words_ids", "entry " + std::to_string(i) + " holds the negative id " + std::to_string(id));
  }
  if (forced_bos_token_id < -1)
    throw OptionError("forced_bos_token_id", "must be a token id or -1 (none), got " + std::to_string(forced_bos_token_id));
  if (sample && beam_size > 1)
    throw OptionError("sample", "cannot be combined with a beam size of " + std::to_string(beam_size) +
                                    " (sampling draws one hypothesis per source; use beam size 1)");
}

Index resolve_max_length(const DecodingOptions& options, const Decoder& decoder, Index source_length, Index fed) {
  options.validate();
  const Index min_length = options.min_length;
  const Index max_length = options.max_length;
  // The last generated token is never fed back, so `fed` inputs leave room for
  // max_steps - fed + 1 outputs.
  const Index positions = std::min(decoder.max_steps(), kMaxSequenceLength);
  const Index room = positions - fed + 1;
  const std::string limit = decoder.max_steps() <= kMaxSequenceLength
                                ? "the decoder's learned positions (max_position_embeddings=" +
                                      std::to_string(decoder.max_steps()) + ")"
                                : "ordo's limit of " + std::to_string(kMaxSequenceLength) + " tokens";
  if (room < 1)
    throw Error("decoder", "a prompt of " + std::to_string(fed) + " tokens fills " + limit,
                "shorten the prompt");
  const std::string after_prompt = fed > 1 ? " after a prompt of " + std::to_string(fed) + " tokens" : "";
  if (min_length > room)
    throw OptionError("min_length", std::to_string(min_length) + " is beyond " + limit + after_prompt);
  if (max_length == 0) {
    const Index automatic = source_length > 0 ? 2 * source_length + 10 : kAutomaticGenerationLength;
    return std::max(std::min(automatic, room), min_length);
  }
  if (max_length > room && options.max_length_is_ceiling) return std::max(room, min_length);
  if (max_length > room)
    throw OptionError("max_length", std::to_string(max_length) + " is beyond " + limit + after_prompt +
                                        "; use at most " + std::to_string(room));
  return max_length;
}

}  // namespace ordo
