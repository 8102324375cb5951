// What a Transformer is used for: encode a source, translate it greedily, score a
// target under teacher forcing.
#pragma once

#include <span>
#include <vector>

#include "engine/transformer.h"

namespace ordo {

struct SearchOptions {
  // Most target tokens to generate, eos included. 0: automatic, 2 x source length + 10,
  // capped where a learned-position decoder runs out of positions.
  Index max_length = 0;

  // The effective maximum for a source of `source_length` tokens; throws Error when an
  // explicit max_length is negative or beyond what the decoder's positions allow.
  Index resolve_max_length(const Decoder& decoder, Index source_length) const;
};

struct Hypothesis {
  std::vector<int> ids;                // generated tokens, eos included when produced
  std::vector<float> token_logprobs;   // log p(ids[t] | source, ids[<t])
  double score = 0.0;                  // sum of token_logprobs
  bool finished = false;               // ended with eos (not cut at max_length)
};

// The encoder output [S, d] of one source.
Matrix encode(const Transformer& model, std::span<const int> source);

// Greedy search from decoder_start until eos or the maximum length. Ties between
// equal logits go to the lowest id.
Hypothesis greedy_search(const Transformer& model, std::span<const int> source,
                         const SearchOptions& options = {});

// The same, on a source already encoded (memory [S, d], as encode returns), for callers
// that also need the encoder output.
Hypothesis greedy_decode(const Transformer& model, ConstMatrixRef memory,
                         const SearchOptions& options = {});

// Teacher-forced log-probability of each target token: the decoder reads
// [decoder_start, target[0..n-2]] and predicts target[0..n-1].
std::vector<float> score_target(const Transformer& model, std::span<const int> source,
                                std::span<const int> target);

}  // namespace ordo
