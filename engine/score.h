// Teacher forcing: the log-probability a model gives each token of a target, all at
// once. Encoder-decoder: the decoder reads [decoder_start, target[0..n-2]] and predicts
// target[0..n-1]. Decoder-only (no sources): it reads target[0..n-2] and predicts
// target[1..n-1], n-1 log-probs. Each Score holds the predicted ids, their log-probs and
// their sum, or its error.
#pragma once

#include <span>
#include <vector>

#include "engine/search.h"
#include "ordo/results.hpp"

namespace ordo {

// Scores sources[i] -> targets[i] for every i as one batch; for a decoder-only model
// pass no sources (an empty span) and targets of at least 2 tokens.
std::vector<Score> score_batch(const Transformer& model, std::span<const std::vector<int>> sources,
                               std::span<const std::vector<int>> targets);
// The same, reusing `workspace`'s buffers.
std::vector<Score> score_batch(const Transformer& model, std::span<const std::vector<int>> sources,
                               std::span<const std::vector<int>> targets, DecodeWorkspace& workspace);

// One pair (source empty for a decoder-only model); throws Error when it cannot be
// scored.
std::vector<float> score_target(const Transformer& model, std::span<const int> source, std::span<const int> target);

}  // namespace ordo
