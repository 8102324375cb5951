#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace ordo {

namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

SequenceRandom::SequenceRandom(std::uint64_t seed, std::uint64_t sequence) {
  // Two splitmix rounds decorrelate neighbouring (seed, sequence) pairs.
  std::uint64_t mix = seed;
  mix = splitmix64(mix) ^ sequence;
  for (std::uint64_t& word : state_) word = splitmix64(mix);
}

std::uint64_t SequenceRandom::next() {  // xoshiro256** (Blackman and Vigna)
  const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const std::uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

Sampler::Sampler(const DecodingOptions& options, Index vocab_size)
    : temperature_(options.temperature),
      top_k_(options.top_k),
      top_p_(options.top_p),
      order_(static_cast<std::size_t>(vocab_size)),
      weights_(static_cast<std::size_t>(vocab_size)) {}

int Sampler::draw(std::span<const float> logprobs, SequenceRandom& random) {
  // The possible tokens, most likely first (ties: lower id). Only a top-k or top-p cut
  // needs the order; without one the draw walks ids in order.
  std::size_t count = 0;
  for (std::size_t v = 0; v < logprobs.size(); ++v)
    if (std::isfinite(logprobs[v])) order_[count++] = static_cast<int>(v);
  const auto likelier = [&](int a, int b) {
    const float la = logprobs[static_cast<std::size_t>(a)], lb = logprobs[static_cast<std::size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  const bool cut = (top_k_ > 0 && static_cast<std::size_t>(top_k_) < count) || top_p_ < 1.0;
  if (cut) {
    if (top_k_ > 0 && static_cast<std::size_t>(top_k_) < count) {
      std::partial_sort(order_.begin(), order_.begin() + top_k_, order_.begin() + static_cast<std::ptrdiff_t>(count), likelier);
      count = static_cast<std::size_t>(top_k_);
    } else {
      std::sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(count), likelier);
    }
  }

  // Weights relative to the most likely token, so exp never overflows.
  double best = -INFINITY;
  for (std::size_t i = 0; i < count; ++i) best = std::max(best, static_cast<double>(logprobs[static_cast<std::size_t>(order_[i])]));
  double total = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    weights_[i] = std::exp((logprobs[static_cast<std::size_t>(order_[i])] - best) / temperature_);
    total += weights_[i];
  }
  if (top_p_ < 1.0) {  // the smallest likeliest prefix holding top_p of the mass
    double mass = 0.0;
    std::size_t keep = 0;
    while (keep < count) {
      mass += weights_[keep++];
      if (mass >= top_p_ * total) break;
    }
    count = keep;
    total = mass;
  }

  double target = random.uniform() * total;
  for (std::size_t i = 0; i < count; ++i) {
    target -= weights_[i];
    if (target < 0.0) return order_[i];
  }
  return order_[count - 1];  // rounding left a sliver of mass past the last token
}

}  // namespace ordo
