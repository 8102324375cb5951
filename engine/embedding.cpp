#include "engine/embedding.h"

namespace ordo {

Embedding::Embedding(WeightMatrix table, float scale,
                     std::shared_ptr<const AdditivePositions> positions,
                     std::optional<NormWeights> norm, float norm_eps)
    : table_(std::move(table)),
      scale_(scale),
      positions_(std::move(positions)),
      norm_(std::move(norm)),
      norm_eps_(norm_eps) {}

void Embedding::embed(std::span<const int> ids, const BatchRows& rows, MatrixRef out) const {
  ops::gather_rows(table_, ids, out);
  if (scale_ != 1.0f) ops::scale(out, scale_);
  positions_->add(out, rows);
  if (norm_) ops::normalize(out, *norm_, norm_eps_, out);
}

}  // namespace ordo
