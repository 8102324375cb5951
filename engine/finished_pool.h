// The finished hypotheses of one source during beam search: the `capacity` best by
// normalized score, score / length^length_penalty (length counting eos).
#pragma once

#include <vector>

#include "engine/search.h"

namespace ordo {

class FinishedPool {
 public:
  FinishedPool(Index capacity, double length_penalty)
      : capacity_(capacity), length_penalty_(length_penalty) {}

  double normalize(double score, Index length) const;
  bool full() const { return static_cast<Index>(entries_.size()) >= capacity_; }
  bool empty() const { return entries_.empty(); }
  // The lowest normalized score held (the pool must not be empty).
  double worst() const;

  // Keeps `hypothesis` (its normalized_score set here) if the pool has room, or if it
  // beats the worst held, which it then replaces (among equals, the latest offered).
  void offer(Hypothesis hypothesis);

  // The best `count` hypotheses, best first (ties: the earlier offered); empties the pool.
  std::vector<Hypothesis> take_best(Index count);

 private:
  struct Entry {
    Hypothesis hypothesis;
    Index order;  // when it was offered
  };
  // Lower normalized score; among equals the later offered.
  static bool worse(const Entry& a, const Entry& b);

  Index capacity_;
  double length_penalty_;
  Index offered_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace ordo
