#include "tools/cli/bench/workload.h"

#include <utility>

#include <ordo/decode_session.hpp>

#include "tools/cli/bench/next_tokens.h"
#include "tools/cli/bench/random_numbers.h"
#include "tools/cli/bench/timing.h"
#include "tools/cli/progress.h"

namespace ordo::tools::bench {

namespace {

// Encode and decode of one fixed batch, reusing every buffer across repetitions.
class Workload {
 public:
  Workload(const Model& model, const BenchOptions& options)
      : decoder_only_(model.is_decoder_only()),
        batch_(options.batch),
        length_(options.src_len),
        steps_(options.new_tokens),
        beam_(options.beam),
        ids_(random_sources(batch_, length_, model.vocabulary_size(decoder_only_ ? Stack::Decoder : Stack::Encoder))),
        session_(model),
        next_(batch_, beam_) {
    // A decoder-only batch opens one sequence per prompt and grows to K by reorder; an
    // encoder-decoder one opens K per source, all reading it.
    for (int b = 0; b < batch_; ++b)
      for (int k = 0; k < (decoder_only_ ? 1 : beam_); ++k) source_of_.push_back(b);
    history_.resize(static_cast<std::size_t>(steps_));
  }

  // Seconds of each phase.
  double encode() {
    const auto start = Clock::now();
    if (decoder_only_)
      prefill();
    else
      session_.encode(ids_, batch_, length_);
    return seconds_since(start);
  }

  double decode() {
    const auto start = Clock::now();
    if (!decoder_only_) {
      session_.start(source_of_, batch_ * beam_, steps_);
      next_.reset(beam_);
      inputs_.assign(static_cast<std::size_t>(batch_ * beam_), session_.decoder_start_token());
    }
    for (int step = 0; step < steps_; ++step) {
      next_.choose(session_.step(inputs_));
      inputs_ = next_.tokens();
      auto& [tokens, parents] = history_[static_cast<std::size_t>(step)];
      tokens = next_.tokens();  // copies into kept capacity: no allocation after the first run
      parents = next_.parents();
      if (beam_ > 1 && step + 1 < steps_) session_.reorder(next_.parents());
    }
    return seconds_since(start);
  }

  std::vector<int> best_sequence() const {
    std::vector<int> ids(static_cast<std::size_t>(steps_));
    int at = 0;
    for (int step = steps_ - 1; step >= 0; --step) {
      const auto& [tokens, parents] = history_[static_cast<std::size_t>(step)];
      ids[static_cast<std::size_t>(step)] = tokens[static_cast<std::size_t>(at)];
      if (beam_ > 1) at = parents[static_cast<std::size_t>(at)];
    }
    return ids;
  }

 private:
  // Decoder-only: the prompts in one pass, their last-row logits, the first tokens (and
  // with a beam, K copies of each prompt's cache).
  void prefill() {
    session_.start(source_of_, batch_ * beam_, length_ + steps_);
    next_.reset(1);
    next_.choose(session_.prefill(ids_, length_));
    inputs_ = next_.tokens();
    if (beam_ > 1) session_.reorder(next_.parents());
  }

  bool decoder_only_;
  int batch_, length_, steps_, beam_;
  std::vector<int> ids_;
  std::vector<int> source_of_;
  DecodeSession session_;
  std::vector<int> inputs_;
  NextTokens next_;
  std::vector<std::pair<std::vector<int>, std::vector<int>>> history_;  // per step: tokens, parents
};

}  // namespace

WorkloadTimes measure_workload(const Model& model, const BenchOptions& options) {
  Workload workload(model, options);
  WorkloadTimes times;
  ProgressBar bar("bench", "runs", static_cast<std::size_t>(options.runs()), stderr_is_terminal());
  for (int i = 0; i < options.runs(); ++i) {
    const double encode = workload.encode();
    const double decode = workload.decode();
    bar.advance(1, static_cast<std::size_t>(options.batch * options.new_tokens));
    if (i < options.warmup) continue;
    times.encode_s.push_back(encode);
    times.decode_s.push_back(decode);
  }
  bar.finish();
  times.sample_ids = workload.best_sequence();
  return times;
}

}  // namespace ordo::tools::bench
