#include "engine/attention_recorder.h"

#include <algorithm>
#include <string>

#include "engine/error.h"

namespace ordo {

namespace {

// Grows m to at least [rows, cols], keeping its values and zeroing the new cells.
void grow(Matrix& m, Index rows, Index cols) {
  if (rows <= m.rows() && cols <= m.cols()) return;
  Matrix bigger(std::max(rows, m.rows()), std::max(cols, m.cols()));
  bigger.fill(0.0f);
  for (Index r = 0; r < m.rows(); ++r) std::ranges::copy(m.row(r), bigger.row(r).begin());
  m = std::move(bigger);
}

}  // namespace

void AttentionRecorder::observe(const AttentionProbabilities& p) {
  const ConstMatrixRef probs = p.probabilities;
  const std::lock_guard lock(mutex_);
  Matrix& m = matrices_[Key{p.kind, p.layer, p.sequence, p.head}];
  grow(m, p.first_query_step + probs.rows(), probs.cols());
  for (Index i = 0; i < probs.rows(); ++i) {
    const auto row = probs.row(i);
    std::ranges::copy(row, m.row(p.first_query_step + i).begin());
  }
}

const Matrix& AttentionRecorder::at(const Key& key) const {
  const auto found = matrices_.find(key);
  if (found == matrices_.end())
    throw Error("attention recorder",
                std::string("nothing recorded for ") + attention_kind_name(key.kind) + " attention, layer " +
                    std::to_string(key.layer) + ", sequence " + std::to_string(key.sequence) + ", head " +
                    std::to_string(key.head),
                "set the observer before running that stack, and check the layer and head exist");
  return found->second;
}

std::vector<AttentionRecorder::Key> AttentionRecorder::keys() const {
  std::vector<Key> out;
  for (const auto& [key, matrix] : matrices_) out.push_back(key);
  return out;
}

}  // namespace ordo
