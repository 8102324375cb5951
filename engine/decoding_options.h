// How to decode: greedy, beam search or sampling, and the constraints on the output.
//
// A plain struct: set the fields you need by name, leave the rest at their defaults,
// and call validate() (every search does) to get an OptionError naming a bad field.
//
//   DecodingOptions options;
//   options.beam_size = 4;
//   options.n_best = 3;
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace ordo {

class Decoder;

// The range of repetition_penalty. R and 1/R are mirror images (discourage or encourage
// repetition); beyond 100 a penalized logit is scaled more than 100-fold, which already
// makes its token certain or impossible, and a far larger factor (1e-40) overflows
// float logits to infinity.
inline constexpr double kMinRepetitionPenalty = 0.01;
inline constexpr double kMaxRepetitionPenalty = 100.0;

// max_length 0 when continuing a prompt: at most this many new tokens.
inline constexpr Index kAutomaticGenerationLength = 128;

struct DecodingOptions {
  // Hypotheses kept per source at every step. 1 is greedy search.
  Index beam_size = 1;
  // Hypotheses returned per source, best first; at most beam_size.
  Index n_best = 1;
  // Hypotheses are ranked by score / length^length_penalty, the length counting eos
  // (Hugging Face's form). 0 ranks by the plain sum of log-probabilities; > 0 favours
  // longer outputs.
  double length_penalty = 1.0;

  // Most generated tokens, eos included (a prompt or forced prefix does not count).
  // 0: automatic: 2 x source length + 10 when translating, kAutomaticGenerationLength
  // when continuing a prompt; never more than the decoder has positions for.
  Index max_length = 0;
  // Fewest target tokens, eos included: eos is impossible before. 0: no minimum.
  Index min_length = 0;
  // A token that would complete an n-gram of this size already in the output is
  // impossible. 0: off.
  Index no_repeat_ngram_size = 0;
  // CTRL's penalty on tokens already in the output: their logit is divided by it when
  // positive, multiplied when negative. 1: off; > 1 discourages repetition. In
  // [kMinRepetitionPenalty, kMaxRepetitionPenalty] = [0.01, 100].
  double repetition_penalty = 1.0;

  // Draw each token from the model's distribution instead of searching. Needs
  // beam_size 1.
  bool sample = false;
  // Sampling: the distribution is softmax(logits / temperature). > 0; < 1 sharpens.
  double temperature = 1.0;
  // Sampling: draw only among the top_k most likely tokens. 0: all.
  Index top_k = 0;
  // Sampling: draw only among the most likely tokens whose probabilities add up to at
  // least top_p (nucleus sampling). In (0, 1]; 1: all.
  double top_p = 1.0;
  // Sampling: sequence i of a request draws from its own generator, seeded from (seed,
  // i), so results do not depend on threads or on which sequences share a batch.
  std::uint64_t seed = 0;

  // Throws OptionError naming the first field that is out of range or contradicts
  // another.
  void validate() const;

  // The effective maximum for a source of `source_length` tokens (0 for a decoder-only
  // model) when the decoder reads `fed` tokens before its first prediction
  // (decoder_start and any forced prefix, or the prompt); throws OptionError when an
  // explicit max_length is beyond what the decoder's positions or ordo allow, or below
  // min_length, and Error when the prompt alone fills the positions.
  Index resolve_max_length(const Decoder& decoder, Index source_length, Index fed = 1) const;
};

}  // namespace ordo
