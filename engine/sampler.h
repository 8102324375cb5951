// Drawing a token from log-probabilities: temperature, top-k, top-p (nucleus).
//
//   p(v) ∝ exp(logprob(v) / temperature) over the allowed tokens, where the allowed
//   tokens are the top_k most likely (0: all), then the smallest prefix of those, most
//   likely first, whose probabilities sum to at least top_p. Ties in likelihood go to
//   the lower id. Impossible tokens (-inf) are never drawn.
//
// Each sequence draws from its own SequenceRandom, seeded from (seed, sequence index):
// the same seed gives the same output whatever the thread count or batch composition.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/decoding_options.h"

namespace ordo {

// A 64-bit generator (splitmix64-seeded xoshiro256**), fully specified here so that a
// seed means the same draws on every platform and standard library.
class SequenceRandom {
 public:
  SequenceRandom(std::uint64_t seed, std::uint64_t sequence);
  std::uint64_t next();
  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_[4];
};

class Sampler {
 public:
  Sampler(const DecodingOptions& options, Index vocab_size);

  // A token drawn from log-probabilities [V] (at least one finite). Allocates nothing.
  int draw(std::span<const float> logprobs, SequenceRandom& random);

 private:
  double temperature_;
  Index top_k_;
  double top_p_;
  std::vector<int> order_;       // [V] scratch: token ids, most likely first
  std::vector<double> weights_;  // [V] scratch: exp((lp - max) / T) in `order_` order
};

}  // namespace ordo
