#include "tools/cli/bench/next_tokens.h"

#include <algorithm>
#include <limits>

#include <cmath>

namespace ordo::tools::bench {

namespace {

// log_softmax in place, as the engine's search computes it: the row's max subtracted,
// the exponentials summed in double. An all -inf row stays -inf.
void log_softmax(std::span<float> row) {
  const float max = *std::max_element(row.begin(), row.end());
  if (max == -std::numeric_limits<float>::infinity()) return;
  double sum = 0.0;
  for (const float x : row) sum += std::exp(x - max);
  const float log_sum = static_cast<float>(std::log(sum));
  for (float& x : row) x = (x - max) - log_sum;
}

}  // namespace

void NextTokens::reset(int live) {
  scores_.assign(static_cast<std::size_t>(sources_ * live), 0.0f);
  for (std::size_t i = 0; i < scores_.size(); ++i)
    if (i % static_cast<std::size_t>(live) != 0) scores_[i] = -std::numeric_limits<float>::infinity();
}

void NextTokens::choose(const Logits& logits) {
  if (beam_ == 1) return argmax(logits);
  beam_step(logits);
}

bool NextTokens::better(const Candidate& a, const Candidate& b) {
  if (a.total != b.total) return a.total > b.total;
  return a.row != b.row ? a.row < b.row : a.token < b.token;
}

void NextTokens::argmax(const Logits& logits) {
  tokens_.resize(static_cast<std::size_t>(logits.rows));
  for (int r = 0; r < logits.rows; ++r) {
    const auto row = logits.row(r);
    tokens_[static_cast<std::size_t>(r)] = static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
  }
}

void NextTokens::best_of_row(std::span<const float> row, int r, float score) {
  const std::size_t first = candidates_.size();
  for (std::size_t v = 0; v < row.size(); ++v) {
    const Candidate c{score + row[v], r, static_cast<int>(v)};
    if (candidates_.size() - first == static_cast<std::size_t>(beam_) && !better(c, candidates_.back())) continue;
    if (candidates_.size() - first == static_cast<std::size_t>(beam_)) candidates_.pop_back();
    auto at = std::upper_bound(candidates_.begin() + static_cast<std::ptrdiff_t>(first), candidates_.end(), c, better);
    candidates_.insert(at, c);
  }
}

void NextTokens::beam_step(const Logits& logits) {
  for (int r = 0; r < logits.rows; ++r) log_softmax(logits.row(r));
  const int live = logits.rows / sources_;
  tokens_.clear();
  parents_.clear();
  next_scores_.clear();
  for (int b = 0; b < sources_; ++b) {
    candidates_.clear();
    for (int r = b * live; r < (b + 1) * live; ++r) best_of_row(logits.row(r), r, scores_[static_cast<std::size_t>(r)]);
    std::partial_sort(candidates_.begin(), candidates_.begin() + beam_, candidates_.end(), better);
    for (int k = 0; k < beam_; ++k) {
      const Candidate& c = candidates_[static_cast<std::size_t>(k)];
      tokens_.push_back(c.token);
      parents_.push_back(c.row);
      next_scores_.push_back(c.total);
    }
  }
  scores_.swap(next_scores_);
}

}  // namespace ordo::tools::bench
