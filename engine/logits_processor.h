// One row of logits -> the log-probabilities a search chooses from, with the output
// constraints of DecodingOptions applied:
//
//   1. repetition penalty (CTRL): the logit of every token already in the output is
//      divided by R when positive, multiplied by R when negative;
//   2. log-softmax: these are the token log-probabilities results report;
//   3. impossible tokens become -inf, without renormalizing the others: eos (every eos
//      id) before min_length, any token that would complete an n-gram of
//      no_repeat_ngram_size already in the output or a sequence of bad_words_ids, and
//      at the first step every token but forced_bos_token_id when there is one.
//
// "The output" is the decoder's context after decoder_start: a forced prefix or prompt,
// then the generated tokens (as Hugging Face's generate() sees its input_ids).
//
// A NaN or +inf logit means broken weights and throws Error rather than being decoded
// into nonsense. Holds scratch: one processor per request, not shared across threads.
#pragma once

#include <span>
#include <vector>

#include "engine/decoding_options.h"

namespace ordo {

class LogitsProcessor {
 public:
  // Throws OptionError when bad_words_ids or forced_bos_token_id name an id outside
  // [0, vocab_size).
  LogitsProcessor(const DecodingOptions& options, std::span<const int> eos_ids, Index vocab_size);

  // row: raw logits [V] -> log-probabilities, in place. `context` is the output so far
  // (prefix and generated tokens, without decoder_start), of which the last `generated`
  // were generated (min_length counts those). Allocates nothing.
  void process(std::span<float> row, std::span<const int> context, Index generated);

 private:
  double repetition_penalty_;
  Index min_length_;
  Index ngram_;
  std::vector<std::vector<int>> bad_words_;
  int forced_first_;
  std::vector<int> eos_;
  std::vector<unsigned char> seen_;  // [V] scratch for the repetition penalty
};

}  // namespace ordo
