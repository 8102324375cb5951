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

#include <ordo/decode_session.hpp>

namespace ordo::tools::bench {

class NextTokens {
 public:
  NextTokens(int sources, int beam) : sources_(sources), beam_(beam) {}

  // `live` beams per source to start with: scores 0 for the first, -inf for the rest,
  // so that a first step from K identical beams expands only one.
  void reset(int live);

  // logits [sources * live, V] (clobbered) -> tokens() [sources * K], parents() for
  // DecodeSession::reorder (beam > 1).
  void choose(const Logits& logits);

  const std::vector<int>& tokens() const { return tokens_; }
  const std::vector<int>& parents() const { return parents_; }

 private:
  struct Candidate {
    float total;
    int row;
    int token;
  };
  static bool better(const Candidate& a, const Candidate& b);

  void argmax(const Logits& logits);
  // The K best candidates of one row, appended to candidates_: score + the K largest
  // log-probabilities (a beam can contribute at most K survivors).
  void best_of_row(std::span<const float> row, int r, float score);
  void beam_step(const Logits& logits);

  int sources_, beam_;
  std::vector<float> scores_, next_scores_;
  std::vector<int> tokens_;
  std::vector<int> parents_;
  std::vector<Candidate> candidates_;
};

}  // namespace ordo::tools::bench
