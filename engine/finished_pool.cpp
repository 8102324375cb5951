#include "engine/finished_pool.h"

#include <algorithm>
#include <cmath>

namespace ordo {

double FinishedPool::normalize(double score, Index length) const {
  return score / std::pow(static_cast<double>(length), length_penalty_);
}

bool FinishedPool::worse(const Entry& a, const Entry& b) {
  const double x = a.hypothesis.normalized_score, y = b.hypothesis.normalized_score;
  return x < y || (x == y && a.order > b.order);
}

double FinishedPool::worst() const {
  return std::min_element(entries_.begin(), entries_.end(), worse)->hypothesis.normalized_score;
}

void FinishedPool::offer(Hypothesis hypothesis) {
  hypothesis.normalized_score = normalize(hypothesis.score, static_cast<Index>(hypothesis.ids.size()));
  Entry entry{std::move(hypothesis), offered_++};
  if (!full()) {
    entries_.push_back(std::move(entry));
    return;
  }
  const auto worst = std::min_element(entries_.begin(), entries_.end(), worse);
  if (entry.hypothesis.normalized_score > worst->hypothesis.normalized_score) *worst = std::move(entry);
}

std::vector<Hypothesis> FinishedPool::take_best(Index count) {
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    const double x = a.hypothesis.normalized_score, y = b.hypothesis.normalized_score;
    return x > y || (x == y && a.order < b.order);
  });
  std::vector<Hypothesis> best;
  for (Entry& entry : entries_) {
    if (static_cast<Index>(best.size()) == count) break;
    best.push_back(std::move(entry.hypothesis));
  }
  entries_.clear();
  return best;
}

}  // namespace ordo
