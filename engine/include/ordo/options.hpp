// How a Translator or Generator decodes: plain structs with documented defaults. Set
// the fields you need by name and leave the rest; the constructor that takes them
// checks them all and throws ordo::OptionError naming the first bad field.
//
//   ordo::TranslatorOptions options;
//   options.decoding.beam_size = 4;   // search 4 hypotheses...
//   options.decoding.n_best = 2;      // ...and return the best 2
#pragma once

#include <cstdint>

namespace ordo::api {

struct DecodingOptions {
  // Hypotheses kept per input at every step. 1 is greedy search.
  int beam_size = 1;
  // Hypotheses returned per input, best first; at most beam_size.
  int n_best = 1;
  // Hypotheses are ranked by score / length^length_penalty, the length counting eos.
  // 0 ranks by the plain sum of log-probabilities; > 0 favours longer outputs.
  double length_penalty = 1.0;
  // Most generated tokens, eos included. 0: automatic: 2 x source length + 10 when
  // translating, 128 new tokens when continuing a prompt; never beyond the model's
  // positions.
  int max_length = 0;
  // Fewest generated tokens, eos included: eos is impossible before. 0: no minimum.
  int min_length = 0;
  // A token that would repeat an n-gram of this size already in the output is
  // impossible. 0: off.
  int no_repeat_ngram_size = 0;
  // CTRL's penalty on tokens already in the output. 1: off; > 1 discourages repetition;
  // in [0.01, 100] (further out, logits overflow).
  double repetition_penalty = 1.0;
  // Draw each token from the model's distribution instead of searching (beam_size 1).
  bool sample = false;
  // Sampling: softmax(logits / temperature). > 0; < 1 sharpens.
  double temperature = 1.0;
  // Sampling: only among the top_k most likely tokens. 0: all.
  int top_k = 0;
  // Sampling: only among the most likely tokens whose probabilities reach top_p. In (0, 1].
  double top_p = 1.0;
  // Sampling: input i of a call draws from a generator seeded from (seed, i), so results
  // do not depend on threads or batching.
  std::uint64_t seed = 0;
};

struct TranslatorOptions {
  // How each sentence is decoded.
  DecodingOptions decoding;
  // Sentences decoded together by translate_batch (sorted by length first).
  int batch_size = 32;
  // The most tokens a source may have, eos included; a longer one is an error (or cut,
  // with truncate). 0: the model's own limit.
  int max_input_tokens = 0;
  // Cut a source beyond max_input_tokens to its first tokens instead of failing it;
  // Translation::truncated says so.
  bool truncate = false;
};

struct GeneratorOptions {
  // How each prompt is continued.
  DecodingOptions decoding;
  // Prompts decoded together by generate_batch.
  int batch_size = 32;
  // Put the model's bos token before each text prompt, as LLaMA models expect.
  bool add_bos = true;
  // The most tokens a prompt may have, bos included. 0: the model's own limit.
  int max_input_tokens = 0;
  // Cut a prompt beyond max_input_tokens to its last tokens instead of failing it;
  // Generation::truncated says so.
  bool truncate = false;
};

}  // namespace ordo::api

namespace ordo {
// Programs spell the public types ordo::X. The engine's own classes of the same names
// (ordo::Model, ordo::Translator: what this API wraps) are declared in ordo itself and
// never installed; inside the library, qualified ordo::X finds those first.
using namespace api;
}  // namespace ordo
