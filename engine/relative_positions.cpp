#include "engine/relative_positions.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "engine/error.h"
#include "engine/limits.h"

namespace ordo {

namespace {

// m_h = 2^(-8h/n), h = 1..n (n a power of 2): the geometric sequence that starts at
// 2^(-8/n) with that ratio, each term computed directly rather than by repeated products.
std::vector<double> power_of_two_slopes(Index n) {
  std::vector<double> slopes;
  for (Index h = 1; h <= n; ++h) slopes.push_back(std::exp2(-8.0 * static_cast<double>(h) / static_cast<double>(n)));
  return slopes;
}

}  // namespace

std::vector<double> alibi_slopes(Index heads) {
  if (heads < 1) throw Error("alibi", "needs at least one head, got " + std::to_string(heads));
  Index lower = 1;
  while (lower * 2 <= heads) lower *= 2;
  std::vector<double> slopes = power_of_two_slopes(lower);
  if (lower == heads) return slopes;
  // The paper's recipe for other head counts: the closest lower power of two, then the
  // odd-numbered slopes of twice that, as many as are missing.
  const std::vector<double> finer = power_of_two_slopes(2 * lower);
  for (std::size_t i = 0; static_cast<Index>(slopes.size()) < heads; i += 2) slopes.push_back(finer[i]);
  return slopes;
}

AlibiBias::AlibiBias(Index heads, Direction direction) : direction_(direction) {
  for (const double m : alibi_slopes(heads)) slopes_.push_back(static_cast<float>(m));
}

void AlibiBias::add(MatrixRef scores, Index head, Index first_query_step) const {
  const float slope = slopes_.at(static_cast<std::size_t>(head));
  for (Index i = 0; i < scores.rows(); ++i) {
    const Index query = first_query_step + i;
    float* row = scores.data() + i * scores.stride();
    // Causal keys after the query get a positive bias here, and the mask right after.
    for (Index j = 0; j < scores.cols(); ++j) {
      const Index distance = direction_ == Direction::Bidirectional ? std::abs(query - j) : query - j;
      row[j] -= slope * static_cast<float>(distance);
    }
  }
}

Index t5_relative_bucket(Index relative_position, Direction direction, Index num_buckets,
                         Index max_distance) {
  Index bucket = 0;
  Index distance = 0;
  if (direction == Direction::Bidirectional) {
    num_buckets /= 2;
    if (relative_position > 0) bucket += num_buckets;  // keys after the query
    distance = std::abs(relative_position);
  } else {
    distance = std::max<Index>(-relative_position, 0);  // keys after the query: bucket 0
  }
  const Index max_exact = num_buckets / 2;
  if (distance < max_exact) return bucket + distance;
  // In float, as T5 computes it (float32 tensors), so that the boundaries agree with
  // models trained there: max_exact + log(d / max_exact) / log(max_distance / max_exact)
  // * (num_buckets - max_exact), truncated, at most the side's last bucket.
  const float scaled =
      std::log(static_cast<float>(distance) / static_cast<float>(max_exact)) /
      static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact))) *
      static_cast<float>(num_buckets - max_exact);
  const Index large = max_exact + static_cast<Index>(scaled);
  return bucket + std::min(large, num_buckets - 1);
}

T5RelativeBias::T5RelativeBias(TensorView table, Direction direction, Index max_distance)
    : reach_(std::min(max_distance, kMaxSequenceLength - 1)) {
  if (table.rank() != 2)
    throw Error("relative_attention_bias", "expected a [num_buckets, heads] table, got " + to_string(table.shape()));
  const Index buckets = table.dim(0), heads = table.dim(1);
  if (buckets < 4 || max_distance <= buckets / 2)
    throw Error("relative_attention_bias",
                std::to_string(buckets) + " buckets with max_distance " + std::to_string(max_distance),
                "T5 buckets need at least 4 buckets and max_distance > num_buckets / 2");
  by_distance_.assign(static_cast<std::size_t>(heads), std::vector<float>(static_cast<std::size_t>(2 * reach_ + 1)));
  for (Index relative = -reach_; relative <= reach_; ++relative) {
    const Index bucket = t5_relative_bucket(relative, direction, buckets, max_distance);
    for (Index h = 0; h < heads; ++h)
      by_distance_[static_cast<std::size_t>(h)][static_cast<std::size_t>(relative + reach_)] =
          table.data()[bucket * heads + h];
  }
}

void T5RelativeBias::add(MatrixRef scores, Index head, Index first_query_step) const {
  // Distances reach from key 0 back to the last query and from the first query on to
  // the last key; past the longest sequence a clamped distance would not be T5's bucket.
  const Index back = first_query_step + scores.rows() - 1, ahead = scores.cols() - 1 - first_query_step;
  if (first_query_step < 0 || std::max(back, ahead) > kMaxSequenceLength - 1)
    throw Error("t5_relative bias",
                "queries from step " + std::to_string(first_query_step) + " over " + std::to_string(scores.cols()) +
                    " keys are more than " + std::to_string(kMaxSequenceLength - 1) +
                    " positions apart, beyond ordo's limit of " + std::to_string(kMaxSequenceLength) + " positions");
  const std::vector<float>& bias = by_distance_.at(static_cast<std::size_t>(head));
  for (Index i = 0; i < scores.rows(); ++i) {
    const Index query = first_query_step + i;
    float* row = scores.data() + i * scores.stride();
    for (Index j = 0; j < scores.cols(); ++j) {
      const Index relative = std::clamp(j - query, -reach_, reach_);
      row[j] += bias[static_cast<std::size_t>(relative + reach_)];
    }
  }
}

}  // namespace ordo
