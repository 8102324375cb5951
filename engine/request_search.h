// One request's search, step by step: its live beams' histories, its finished pool and
// its sampling stream. The decoder's work is not here: a live set (engine/live_batch.h)
// runs every request's beams through one decoder step, then hands each request its rows
// of logits to choose from. The rules (greedy, beam search, sampling, and when a request
// is done) are search.h's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/decode_inputs.h"
#include "engine/decoding_options.h"
#include "engine/finished_pool.h"
#include "engine/logits_processor.h"
#include "engine/sampler.h"
#include "engine/search.h"
#include "engine/transformer.h"

namespace ordo {

// What the requests decoded with one DecodingOptions share: the options and the
// processor and sampler made from them (their [V] scratch is used one request at a
// time, on the live set's thread).
struct SearchRules {
  SearchRules(const Transformer& model, const DecodingOptions& options);

  DecodingOptions options;
  LogitsProcessor processor;
  Sampler sampler;
};

// Scratch every request's choice reuses: a live set holds one.
struct SearchScratch {
  std::vector<Candidate> candidates;
  std::vector<int> order;  // [V]
};

class RequestSearch {
 public:
  // Called with (token, its log-probability) as soon as a token is final (TokenCallback,
  // search.h, for this one request).
  using OnToken = std::function<void(int, float)>;

  // A search for `request` (checked by check_request), of up to `max_length` generated
  // tokens (resolve_max_length), sampling from the stream (rules.options.seed, stream).
  RequestSearch(const Transformer& model, std::shared_ptr<SearchRules> rules, const DecodeRequest& request,
                Index max_length, std::uint64_t stream, OnToken on_token);

  // Live beams: the decoder sequences this request holds, in beam rank order.
  Index live() const { return static_cast<Index>(scores_.size()); }
  // The token live beam `beam` feeds the decoder next: the last one it chose.
  int last_token(Index beam) const { return history(beam)[static_cast<std::size_t>(prefix_length_ + generated_ - 1)]; }
  // Decoder steps a sequence of this request takes: its forced input, then all but the
  // last generated token.
  Index steps_needed() const { return forced_length_ + max_length_ - 1; }
  Index beam_size() const { return beam_; }

  // One choice: logits rows first .. first + live() - 1 hold this request's beams'
  // raw logits (made log-probabilities here, in place). Appends each surviving beam's
  // parent row to `parents`, in rank order, and makes the survivors the live beams.
  // Returns false once the request is done (it then keeps no beam).
  bool advance(Matrix& logits, Index first, std::vector<Index>& parents, SearchScratch& scratch);

  // The outcome once done: the n_best hypotheses, or why there are none.
  DecodeResult result();

 private:
  std::span<const int> history(Index beam) const {
    return std::span<const int>(ids_).subspan(static_cast<std::size_t>(beam * width_), static_cast<std::size_t>(width_));
  }
  // Beam b's context after the tokens generated so far: its prefix, then them.
  std::span<const int> context_ids(Index beam) const {
    return history(beam).first(static_cast<std::size_t>(prefix_length_ + generated_));
  }
  std::span<const int> generated_ids(Index beam) const {
    return context_ids(beam).subspan(static_cast<std::size_t>(prefix_length_));
  }
  std::span<const float> generated_logprobs(Index beam) const {
    return std::span<const float>(logprobs_).subspan(static_cast<std::size_t>(beam * max_length_),
                                                     static_cast<std::size_t>(generated_));
  }
  Hypothesis hypothesis(Index beam, int token, float logprob, double total, bool finished) const;
  void keep(Index beam, int token, float logprob, double total);
  void select_beams(const Matrix& logits, Index first, SearchScratch& scratch);
  void follow_parents();

  const Transformer& model_;
  std::shared_ptr<SearchRules> rules_;
  Index beam_;
  Index max_length_;
  Index prefix_length_;
  Index forced_length_;  // what the decoder reads before the first choice
  Index width_;          // of a history row: prefix + max_length
  Index generated_ = 0;  // tokens chosen so far by each live beam
  FinishedPool pool_;
  SequenceRandom random_;
  OnToken on_token_;
  std::string error_;
  // Per live beam: score, and [beams, width] / [beams, max_length] histories of the
  // context and of the generated tokens' log-probs; this step's survivors (parent
  // beam, new token, its log-prob, total) and the histories they make.
  std::vector<double> scores_, next_scores_;
  std::vector<int> ids_, next_ids_;
  std::vector<float> logprobs_, next_logprobs_;
  std::vector<Index> parents_;
  std::vector<int> next_tokens_;
  std::vector<float> next_logprob_;
};

}  // namespace ordo
