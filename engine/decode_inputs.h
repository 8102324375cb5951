// A batch's inputs, as decoding (search.cpp) and scoring (score.cpp) both prepare them:
// the ids checked, the sources encoded, the decoder started and its forced inputs laid
// out; and the workspace's buffers they all fill and reuse.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/encoder.h"
#include "engine/search.h"

namespace ordo {

// Throws Error unless `source` is a valid encoder input: the model has an encoder, and
// the source is non-empty, its ids within the vocabulary, within ordo's and the
// positions' length limits.
void check_source(const Transformer& model, std::span<const int> source);

// Throws Error unless `request` can be decoded by `model`.
void check_request(const Transformer& model, const DecodeRequest& request);

// The encoder output of a batch of sources (each checked by check_source), padded to
// the longest.
EncodedBatch encode_batch(const Transformer& model, std::span<const std::vector<int>> sources);

// The encoder output [S, d] of one source.
Matrix encode(const Transformer& model, std::span<const int> source);

// A candidate extension during a beam step.
struct Candidate {
  double total;  // the beam's score + this token's log-prob
  Index beam;    // rank of the beam among its source's live beams
  int token;
  float logprob;
};

struct DecodeWorkspace::Buffers {
  // Encoding.
  std::vector<std::vector<int>> sources;
  std::vector<int> padded_ids;  // [B*L]
  EncoderWorkspace encoder;
  EncodedBatch memory;
  // Decoding.
  DecoderState state;
  Matrix logits;
  std::vector<Index> source_of;
  std::vector<int> inputs;      // the forced decoder inputs, padded [B*T]
  std::vector<Index> input_lengths;
};

// Checks ids against a vocabulary before they reach an embedding lookup, so the error
// says which input was at fault.
void check_ids(std::span<const int> ids, Index vocab_size, const char* what);

template <class Sequences, class Length>
Index longest(const Sequences& sequences, Length length) {
  Index most = 0;
  for (const auto& s : sequences) most = std::max(most, length(s));
  return most;
}
Index longest(std::span<const std::vector<int>> sequences);

// One sequence as a batch of one, for the single-source conveniences.
std::vector<std::vector<int>> batch_of_one(std::span<const int> ids);

// Every id that ends a hypothesis.
std::vector<int> eos_ids(const SpecialTokens& tokens);

// How many tokens the decoder reads before its first prediction for `request`.
Index decoder_input_length(const Transformer& model, const DecodeRequest& request);

// The encoder output of a batch of sources (each checked by check_source), padded to
// the longest, into buffers.memory.
void encode_sources(const Transformer& model, std::span<const std::vector<int>> sources,
                    DecodeWorkspace::Buffers& buffers);

// Opens one live sequence per request (encoding the sources of an encoder-decoder
// model first, into buffers.memory), with room for max_sequences of max_steps tokens.
void start_decoder(const Transformer& model, std::span<const std::vector<int>> sources, Index requests,
                   DecodeWorkspace::Buffers& buffers, Index max_sequences, Index max_steps);

// Lays out every request's forced decoder input in buffers.inputs [B*T] (T the
// longest), padded with pad; lengths in buffers.input_lengths. Returns T.
Index pad_inputs(const Transformer& model, std::span<const DecodeRequest> requests, DecodeWorkspace::Buffers& buffers);

}  // namespace ordo
