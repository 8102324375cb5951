// The next input of every sequence of the bench's decode: the argmax of its logits
// (beam 1), or a fixed beam step: per source, the K best of score + log_softmax over
// every live beam's V continuations (ties: the earlier beam, then the lower id).
//
// The bench's own, not the engine's search: the search stops at eos and prunes finished
// hypotheses, while the bench must run exactly --new-tokens steps for every sequence so
// that every engine (tools/bench/bench_peer.py has the same class) does the same work.
#pragma once

#include <span>
#include <vector>

#include "engine/tensor.h"

namespace ordo::tools::bench {

class NextTokens {
 public:
  NextTokens(Index sources, Index beam) : sources_(sources), beam_(beam) {}

  // `live` beams per source to start with: scores 0 for the first, -inf for the rest,
  // so that a first step from K identical beams expands only one.
  void reset(Index live);

  // logits [sources * live, V] (clobbered) -> tokens() [sources * K], parents() for
  // DecoderState::reorder (beam > 1).
  void choose(MatrixRef logits);

  const std::vector<int>& tokens() const { return tokens_; }
  const std::vector<Index>& parents() const { return parents_; }

 private:
  struct Candidate {
    float total;
    Index row;
    int token;
  };
  static bool better(const Candidate& a, const Candidate& b);

  void argmax(ConstMatrixRef logits);
  // The K best candidates of one row, appended to candidates_: score + the K largest
  // log-probabilities (a beam can contribute at most K survivors).
  void best_of_row(std::span<const float> row, Index r, float score);
  void beam_step(MatrixRef logits);

  Index sources_, beam_;
  std::vector<float> scores_, next_scores_;
  std::vector<int> tokens_;
  std::vector<Index> parents_;
  std::vector<Candidate> candidates_;
};

}  // namespace ordo::tools::bench
