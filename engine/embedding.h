// Token ids -> the first layer's input: look up, scale, add positions, normalize.
//
//   x[r] = E[id_r] * scale + PE(offset + step of row r)        [S*T, d]
//   x    = LayerNorm(x)                                        (only with layernorm_embedding)
#pragma once

#include <memory>
#include <optional>
#include <span>

#include "engine/batch.h"
#include "engine/ops.h"
#include "engine/positions.h"
#include "engine/tensor.h"

namespace ordo {

class Embedding {
 public:
  // table [vocab, d]; scale is sqrt(d) with scale_embedding, else 1.
  Embedding(WeightMatrix table, float scale, std::shared_ptr<const AdditivePositions> positions,
            std::optional<NormWeights> norm, float norm_eps);

  // out [ids.size(), d], rows laid out as `rows` says. An id outside [0, vocab) throws
  // Error.
  void embed(std::span<const int> ids, const BatchRows& rows, MatrixRef out) const;

  Index vocab_size() const { return table_.rows(); }
  Index dim() const { return table_.cols(); }
  const WeightMatrix& table() const { return table_; }
  // Longest sequence the positions allow (learned tables are finite).
  Index max_steps() const { return positions_->max_steps(); }
  // Throws Error when a sequence of `count` tokens needs positions the model lacks.
  void check_length(Index count) const { positions_->check_steps(0, count); }

 private:
  WeightMatrix table_;
  float scale_;
  std::shared_ptr<const AdditivePositions> positions_;
  std::optional<NormWeights> norm_;
  float norm_eps_;
};

}  // namespace ordo
