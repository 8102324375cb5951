// What a Translator or Generator returns: plain data, owned by the caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ordo/export.hpp"

namespace ordo {

// One output of a search: its text, its ids and how likely the model found it.
struct Hypothesis {
  std::string text;                   // the detokenized ids ("" when the model has no tokenizer)
  std::vector<int> ids;               // generated token ids, eos included when produced
  std::vector<float> token_logprobs;  // log p(ids[t] | input, ids[<t]), one per id
  double score = 0.0;                 // sum of token_logprobs
  double normalized_score = 0.0;      // score / length^length_penalty: what the hypotheses are ranked by
  bool finished = false;              // ended with eos (false: cut at max_length)
};

// One sentence's translations, or why it failed (translate_batch never throws for one
// bad line).
struct ORDO_API Translation {
  std::string source;                   // the input text
  std::vector<int> source_ids;          // what the encoder read, eos included
  std::vector<Hypothesis> hypotheses;   // n_best of them, best first; empty on error
  std::string error;                    // why this sentence failed; empty if it did not
  bool truncated = false;               // the source was cut to max_input_tokens (truncate)

  // True when the sentence was translated. Throws nothing.
  bool ok() const noexcept { return error.empty(); }
  // The best hypothesis. Throws ordo::Error (with `error`) when there is none.
  const Hypothesis& best() const;
};

// One token of a continuation as Generator::generate_streamed reports it.
struct GeneratedToken {
  int id = 0;            // the token id
  float logprob = 0.0f;  // log p(id | prompt, the tokens before), as in Hypothesis::token_logprobs
  std::string text;      // what it adds to the continuation's text: empty for eos, and for a byte
                         // piece that begins a character (the token that completes it carries it)
  bool eos = false;      // an end-of-sequence token: the last of a finished continuation
};

// One prompt's continuations, or why it failed.
struct ORDO_API Generation {
  std::string prompt;                   // the prompt text
  std::vector<int> prompt_ids;          // what the decoder read first, bos included
  std::string source;                   // encoder-decoder models: the source it translates
  std::vector<int> source_ids;          // and its ids, eos included; empty for decoder-only models
  std::vector<Hypothesis> hypotheses;   // continuations (text: as it continues the prompt), best first
  std::string error;                    // why this prompt failed; empty if it did not
  bool truncated = false;               // the prompt or source was cut to max_input_tokens

  // True when the prompt was continued. Throws nothing.
  bool ok() const noexcept { return error.empty(); }
  // The best continuation. Throws ordo::Error (with `error`) when there is none.
  const Hypothesis& best() const;
};

// log p(text) token by token under teacher forcing.
struct Score {
  std::vector<int> ids;               // the scored tokens, eos included
  std::vector<float> token_logprobs;  // log p(ids[t] | input, ids[<t]), one per id
  double logprob = 0.0;               // their sum
  std::string error;                  // why this pair failed (score_ids_batch); empty if it did not
  bool truncated = false;             // the source was cut to max_input_tokens (truncate)

  // True when the text was scored. Throws nothing.
  bool ok() const noexcept { return error.empty(); }
};

// The encoder's output for one sentence: a vector of d_model values per source token.
struct ORDO_API EncoderOutput {
  std::vector<int> ids;             // the source ids, eos included
  std::vector<std::string> tokens;  // their pieces ("▁cats"), one per row
  int rows = 0;                     // tokens
  int cols = 0;                     // d_model
  std::vector<float> values;        // [rows, cols], row-major

  // The value of row `token`, column `dim`. Throws ordo::Error outside [rows, cols].
  float at(int token, int dim) const;
};

// Which attention of the stack a matrix comes from.
enum class AttentionKind {
  Encoder,  // the encoder's self-attention: source x source
  Decoder,  // the decoder's causal self-attention: target x target
  Cross,    // the decoder's attention over the encoder output: target x source
};

// "encoder", "decoder" or "cross". Throws nothing.
ORDO_API const char* attention_kind_name(AttentionKind kind) noexcept;

// One head's attention probabilities: row i is query token i, column j key token j;
// each row sums to 1.
struct ORDO_API AttentionMatrix {
  AttentionKind kind = AttentionKind::Encoder;
  int layer = 0;               // 0-based, within the encoder or the decoder stack
  int head = 0;                // 0-based
  int rows = 0;                // queries
  int cols = 0;                // keys
  std::vector<float> values;   // [rows, cols], row-major

  // The probability query `query` gives key `key`. Throws ordo::Error outside [rows, cols].
  float at(int query, int key) const;
};

// Every head's attention for one input, teacher-forced (see Translator::attention).
struct ORDO_API Attention {
  std::vector<std::string> source_tokens;  // encoder and cross-attention keys (empty for decoder-only models)
  std::vector<std::string> target_tokens;  // the decoder's input tokens: its queries and self-attention keys
  std::vector<AttentionMatrix> matrices;   // every (kind, layer, head), in that order

  // The matrix of one head. Throws ordo::Error naming what exists when there is none.
  const AttentionMatrix& get(AttentionKind kind, int layer, int head) const;
};

// What every decode of this process has done so far, summed over all threads: a
// program's timings, as llama.cpp prints them (`ordo --verbose` reports the difference
// over a run). Prefill is the encoder plus the forced decoder input (a prompt) read at
// once; decode is the steps after it, one token per live sequence each.
struct DecodeTotals {
  std::int64_t input_tokens = 0;    // sources (eos included) and forced decoder inputs (prompts)
  double prefill_seconds = 0;       // encoding them, and the decoder reading the forced input
  std::int64_t stepped_tokens = 0;  // tokens the decoder read one step at a time (beams count each)
  double decode_seconds = 0;        // the steps, search included
  std::int64_t output_tokens = 0;   // of each request's best hypothesis
};

// The totals so far. Thread-safe; throws nothing.
ORDO_API DecodeTotals decode_totals() noexcept;

}  // namespace ordo
