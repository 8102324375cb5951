// The bench's fixed workload, timed: the same work in every engine
// (tools/bench/bench_peer.py runs it in PyTorch).
//   - B sources (decoder-only: prompts) of S random ids (random_numbers.h);
//   - encode: the encoder over [B, S] (decoder-only: the prompt prefill, its last-row
//     logits and the first choice of tokens);
//   - decode: exactly N one-token decoder steps per sequence, eos ignored, through the
//     library's ordo::DecodeSession (start / step / reorder), not a search, so nothing
//     can stop early. Encoder-decoder: the cross-attention K/V projection (start), then
//     N steps from decoder_start. With --beam K every source runs K sequences, chosen by
//     NextTokens (next_tokens.h); the KV caches follow them, except after the last step.
#pragma once

#include <vector>

#include <ordo/model.hpp>

#include "tools/cli/bench/options.h"

namespace ordo::tools::bench {

struct WorkloadTimes {
  std::vector<double> encode_s, decode_s;  // one per measured run
  // The decode phase's tokens of the best final sequence (sequence 0), followed back
  // through its parents: a fingerprint to compare engines by.
  std::vector<int> sample_ids;
};

// Runs the workload options.warmup + options.repeats times, every buffer reused across
// runs as a server would; the warm-up runs are not kept. A progress bar is drawn between
// runs, outside the timed phases, and only on a terminal's stderr.
WorkloadTimes measure_workload(const Model& model, const BenchOptions& options);

}  // namespace ordo::tools::bench
