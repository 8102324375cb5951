#include "tools/cli/bench/workload.h"

#include <utility>

#include "tools/cli/bench/next_tokens.h"
#include "tools/cli/bench/random_numbers.h"
#include "tools/cli/bench/timing.h"
#include "tools/cli/progress.h"

namespace ordo::tools::bench {

namespace {

// Encode and decode of one fixed batch, reusing every buffer across repetitions.
class Workload {
 public:
  Workload(const Transformer& model, const BenchOptions& options)
      : model_(model),
        batch_(options.batch),
        length_(options.src_len),
        steps_(options.new_tokens),
        beam_(options.beam),
        ids_(random_sources(batch_, length_, model.decoder_only() ? model.decoder.vocab_size()
                                                                  : model.encoder->embedding().vocab_size())),
        first_steps_(static_cast<std::size_t>(batch_), 0),
        lengths_(static_cast<std::size_t>(batch_), length_),
        next_(batch_, beam_) {
    memory_.lengths = lengths_;
    memory_.rows_per_source = length_;
    for (Index b = 0; b < batch_; ++b)
      for (Index k = 0; k < (model.decoder_only() ? 1 : beam_); ++k) source_of_.push_back(b);
    history_.resize(static_cast<std::size_t>(steps_));
  }

  // Seconds of each phase.
  double encode() {
    const auto start = Clock::now();
    if (model_.decoder_only())
      prefill();
    else
      model_.encoder->encode(ids_, BatchRows{length_, first_steps_, lengths_}, encoder_, memory_.states);
    return seconds_since(start);
  }

  double decode() {
    const auto start = Clock::now();
    if (!model_.decoder_only()) {
      model_.decoder.start(state_, memory_, source_of_, batch_ * beam_, steps_);
      next_.reset(beam_);
      inputs_.assign(static_cast<std::size_t>(batch_ * beam_), model_.tokens.decoder_start);
    }
    for (Index step = 0; step < steps_; ++step) {
      model_.decoder.step(state_, inputs_, logits_);
      next_.choose(logits_);
      inputs_ = next_.tokens();
      auto& [tokens, parents] = history_[static_cast<std::size_t>(step)];
      tokens = next_.tokens();  // copies into kept capacity: no allocation after the first run
      parents = next_.parents();
      if (beam_ > 1 && step + 1 < steps_) state_.reorder(next_.parents());
    }
    return seconds_since(start);
  }

  std::vector<int> best_sequence() const {
    std::vector<int> ids(static_cast<std::size_t>(steps_));
    Index at = 0;
    for (Index step = steps_ - 1; step >= 0; --step) {
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
    model_.decoder.start(state_, source_of_, batch_ * beam_, length_ + steps_);
    model_.decoder.feed(state_, ids_, length_, lengths_, logits_, Decoder::Logits::LastRow);
    next_.reset(1);
    next_.choose(logits_);
    inputs_ = next_.tokens();
    if (beam_ > 1) state_.reorder(next_.parents());
  }

  const Transformer& model_;
  Index batch_, length_, steps_, beam_;
  std::vector<int> ids_;
  std::vector<Index> first_steps_, lengths_, source_of_;
  EncoderWorkspace encoder_;
  EncodedBatch memory_;
  DecoderState state_;
  Matrix logits_;
  std::vector<int> inputs_;
  NextTokens next_;
  std::vector<std::pair<std::vector<int>, std::vector<Index>>> history_;  // per step: tokens, parents
};

}  // namespace

WorkloadTimes measure_workload(const Transformer& model, const BenchOptions& options) {
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
