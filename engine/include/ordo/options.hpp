// How a Translator or Generator decodes: a plain struct with documented defaults. Set
// the fields you need by name and leave the rest; the Translator or Generator that
// takes it checks them all and throws ordo::OptionError naming the first bad field.
//
//   ordo::TranslatorOptions options;
//   options.decoding.beam_size = 4;   // search 4 hypotheses...
//   options.decoding.n_best = 2;      // ...and return the best 2
//
// This is the engine's own options struct: the search reads these very fields, so there
// is nothing to convert and no second set of defaults.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ordo/export.hpp"

namespace ordo {

// The longest source, target or prompt ordo runs, in tokens, whatever the positions would
// allow: attention scores are [T, T] per head (4096^2 floats = 64 MB), and anything
// longer is a mistake in the input more often than a sentence.
inline constexpr std::int64_t kMaxSequenceLength = 4096;

// DecodingOptions::max_length 0 when continuing a prompt: at most this many new tokens.
inline constexpr std::int64_t kAutomaticGenerationLength = 128;

// The most sequences decoded together (TranslatorOptions and GeneratorOptions::batch_size):
// far beyond what memory holds for any real model, but a bound, so that a hostile value
// is refused by name before it sizes anything.
inline constexpr std::int64_t kMaxBatchSize = 65536;

// A check a Translator or Generator call runs on the thread that made it: before each
// text it tokenizes, each batch it decodes or scores, and every decoder step. To stop
// the call (Ctrl-C, a request its client gave up on), throw from it: the exception
// leaves the call, which returns nothing, and the Translator or Generator stays usable
// for the next one. Empty: no check. It runs once per decoder step (milliseconds apart,
// or less for a small model), so keep it cheap. TranslatorOptions::interrupt and
// GeneratorOptions::interrupt hold one.
using InterruptCheck = std::function<void()>;

struct DecodingOptions {
  // Hypotheses kept per input at every step. 1 is greedy search.
  int beam_size = 1;
  // Hypotheses returned per input, best first; at most beam_size.
  int n_best = 1;
  // Hypotheses are ranked by score / length^length_penalty, the length counting eos
  // (Hugging Face's form). 0 ranks by the plain sum of log-probabilities; > 0 favours
  // longer outputs.
  double length_penalty = 1.0;
  // Most generated tokens, eos included (a prompt or forced prefix does not count).
  // 0: automatic: 2 x source length + 10 when translating, kAutomaticGenerationLength
  // new tokens when continuing a prompt; never beyond the model's positions. At most
  // kMaxSequenceLength.
  int max_length = 0;
  // true: a max_length beyond the room the positions leave after a prompt is cut to that
  // room instead of refused. How a checkpoint's max_length applies, which no user chose
  // for this prompt: Model::generation_defaults() has it set when generation_config.json
  // gives max_length (Marian's 512 is its whole position table), and
  // Model::with_generation_defaults keeps it, or clears it for a max_length you chose.
  bool max_length_is_ceiling = false;
  // Fewest generated tokens, eos included: eos is impossible before. 0: no minimum.
  int min_length = 0;
  // A token that would complete an n-gram of this size already in the output is
  // impossible. 0: off.
  int no_repeat_ngram_size = 0;
  // CTRL's penalty on tokens already in the output: their logit is divided by it when
  // positive, multiplied when negative. 1: off; > 1 discourages repetition; in
  // [0.01, 100] (further out, logits overflow).
  double repetition_penalty = 1.0;
  // Token sequences never to be generated (Hugging Face's bad_words_ids; Marian's
  // generation_config.json bans its pad token so): a one-id sequence makes that id
  // impossible at every step; a longer one makes its last id impossible wherever the
  // output ends with the ids before it. Every id must be in the model's vocabulary.
  std::vector<std::vector<int>> bad_words_ids;
  // The first generated token is this id (Hugging Face's forced_bos_token_id; NLLB's
  // target language): every other token is impossible at the first step, and the
  // forced one keeps its own log-probability. -1: none.
  int forced_bos_token_id = -1;
  // Draw each token from the model's distribution instead of searching (beam_size 1).
  bool sample = false;
  // Sampling: softmax(logits / temperature). > 0; < 1 sharpens.
  double temperature = 1.0;
  // Sampling: only among the top_k most likely tokens. 0: all.
  int top_k = 0;
  // Sampling: only among the most likely tokens whose probabilities reach top_p
  // (nucleus sampling). In (0, 1]; 1: all.
  double top_p = 1.0;
  // Sampling: input i of a call draws from a generator seeded from (seed, i), so results
  // do not depend on threads or batching.
  std::uint64_t seed = 0;

  // Throws ordo::OptionError naming the first field that is out of range or contradicts
  // another. Every search calls it; call it yourself to check options early.
  ORDO_API void validate() const;

  // Every field equal: two requests with equal options decode alike (a server batches
  // their admissions).
  bool operator==(const DecodingOptions&) const = default;
};

// The fields of DecodingOptions a checkpoint's generation_config.json gives defaults for
// (Model::generation_defaults()), each true when the program chose its value itself: a
// flag given on the command line, a keyword passed in Python, a field set on purpose.
// Model::with_generation_defaults keeps the chosen ones and takes the checkpoint's value
// for the others, as transformers' generate() lets its keywords override
// generation_config.json. A plain value cannot say this itself: a beam_size of 1 may be
// a choice of greedy search or the default.
//
//   options.decoding.beam_size = 2;
//   options.decoding = model.with_generation_defaults(options.decoding, {.beam_size = true});
struct DecodingChoices {
  bool beam_size = false;             // num_beams
  bool max_length = false;            // max_length, max_new_tokens
  bool length_penalty = false;        // length_penalty
  bool no_repeat_ngram_size = false;  // no_repeat_ngram_size
  bool bad_words_ids = false;         // bad_words_ids (Marian bans its pad token)
  bool forced_bos_token_id = false;   // forced_bos_token_id
};

// A RoPE scaling for Model::load to run a model with instead of its config.json's
// rope_scaling: an experiment on a shipped model without editing files (`--rope-scaling
// TYPE:FACTOR`). What each type does is in engine/rope_scaling.h; the config's own
// parameters of the same type are kept, others get transformers' defaults (yarn and
// llama3: original_max_position_embeddings = max_position_embeddings; llama3:
// low_freq_factor 1, high_freq_factor 4, as Llama 3.1).
struct RopeScalingOverride {
  std::string type;     // "linear", "dynamic", "yarn", "llama3", or "none" (plain RoPE)
  double factor = 1.0;  // finite and > 0; "none" takes none

  // "TYPE:FACTOR" ("yarn:4", "linear:2.5") or "none". Throws ordo::OptionError (field
  // "rope_scaling") naming what is wrong: an unknown type, a factor that is not a
  // finite number > 0, a missing or extra part.
  ORDO_API static RopeScalingOverride parse(std::string_view text);
  // Throws ordo::OptionError (field "rope_scaling") as parse() does.
  ORDO_API void validate() const;
};

// The format a model's weight matrices (its linear layers, embeddings and output head)
// run in; norms and biases always run in float32. Auto runs them as the files store them
// (F32, F16 and BF16 files stay half precision in memory; ordo quantize writes int8 and
// int4 ones). Any other value converts them at load, exactly as `ordo quantize --type`
// would write them: the outputs are bit-identical to the directory it writes.
enum class ComputeType { Auto, F32, F16, BF16, Int8, Int4 };

// "auto", "f32", "f16", "bf16", "int8", "int4".
ORDO_API std::string_view compute_type_name(ComputeType type);
// The inverse. Throws ordo::OptionError (field "compute_type") for any other text.
ORDO_API ComputeType parse_compute_type(std::string_view text);

// How Model::load loads a model directory.
struct LoadOptions {
  // Unset: the config's rope_scaling. Set on a model without RoPE positions: Model::load
  // throws ordo::OptionError (field "rope_scaling").
  std::optional<RopeScalingOverride> rope_scaling;
  // What the weight matrices run as (see ComputeType). A model that cannot take it (int4
  // needs rows of a multiple of 32 weights) makes Model::load throw ordo::Error naming
  // the tensor and the rule.
  ComputeType compute_type = ComputeType::Auto;
  // Weights per scale, for int8 (0: one scale per row) and int4 (a multiple of 32);
  // -1: the type's default (int8 0, int4 32). Throws ordo::OptionError (field
  // "group_size") when set for another type, or invalid for this one.
  int group_size = -1;

  // Throws ordo::OptionError, as Model::load would, for options that are wrong whatever
  // the model (a group size for a type without scales, a bad rope scaling): a program
  // that loads later (a server that listens first) can refuse them up front.
  ORDO_API void validate() const;
};

}  // namespace ordo
