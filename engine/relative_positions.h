// Relative positions: schemes that add a bias per head to the attention scores from the
// distance between query and key, and put nothing into the embeddings (engine/positions.h
// has the ScoreBias interface they implement).
//
//   ALiBi (Press et al., "Train Short, Test Long"): head h adds -m_h * distance, with
//   fixed slopes m_h; nothing is learned, so any length works the same way.
//   T5 relative bias (Raffel et al.): a learned scalar per head and relative-position
//   bucket, looked up from a [buckets, heads] table shared by every layer of a stack.
//
// Both are cross-attention-free: source and target positions are unrelated.
#pragma once

#include <vector>

#include "engine/positions.h"
#include "engine/tensor.h"

namespace ordo {

// The paper's slopes for `heads` heads (>= 1): for a power of two n, m_h = 2^(-8h/n),
// h = 1..n; otherwise the n' = largest power of two below n slopes, then every other
// slope of 2n' until there are n. Throws Error for heads < 1.
std::vector<double> alibi_slopes(Index heads);

// Which way a stack looks: the encoder sees both sides of a query; the decoder is causal.
enum class Direction { Bidirectional, Causal };

class AlibiBias final : public ScoreBias {
 public:
  // Bidirectional: -m_h |i - j| (the paper's symmetric form for an encoder);
  // causal: -m_h (i - j) for keys j <= i (later keys are masked anyway).
  AlibiBias(Index heads, Direction direction);
  void add(MatrixRef scores, Index head, Index first_query_step) const override;
  const std::vector<float>& slopes() const { return slopes_; }

 private:
  std::vector<float> slopes_;  // [heads]
  Direction direction_;
};

// T5's bucket of the relative position key - query (memory_position - context_position
// in T5's code), exactly as T5 computes it: bidirectional stacks give half the buckets to
// each side (keys after the query in the upper half); causal stacks bucket only keys
// before the query (later ones fall in bucket 0). Within a side, distances below half
// its buckets have a bucket each, larger ones share logarithmically wider buckets up to
// max_distance, and everything beyond falls in the side's last bucket.
// Needs num_buckets >= 4 and max_distance > num_buckets / 2 (as ModelConfig checks).
Index t5_relative_bucket(Index relative_position, Direction direction, Index num_buckets,
                         Index max_distance);

class T5RelativeBias final : public ScoreBias {
 public:
  // table [num_buckets, heads] (the tensor model.{stack}.relative_attention_bias.weight).
  // Throws Error when the table is not 2-D or the bucket parameters are unusable; add()
  // throws for a query or key beyond kMaxSequenceLength (engine/limits.h).
  T5RelativeBias(TensorView table, Direction direction, Index max_distance);
  void add(MatrixRef scores, Index head, Index first_query_step) const override;

 private:
  // Beyond +-max_distance every distance is in its side's last bucket, and no sequence
  // holds two tokens more than kMaxSequenceLength - 1 apart, so a bias per clamped
  // distance up to reach_ = min(max_distance, kMaxSequenceLength - 1) is the whole
  // function: [heads][2 * reach_ + 1], indexed by relative position + reach_. At most
  // 32 KB per head whatever config.json claims (max_distance 2^25 once took 2.4 GB),
  // and no log() in the attention loop.
  std::vector<std::vector<float>> by_distance_;
  Index reach_;
};

}  // namespace ordo
