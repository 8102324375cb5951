// Decoding on token ids: a batch of requests (sources to translate, prompts to continue)
// decoded greedily, by beam search or by sampling (DecodingOptions), as one set of live
// sequences. A decode runs in three steps that read top to bottom in search.cpp: size
// the search and check its memory, prefill (the encoder and every forced input at
// once), then one decoder step per generated token. Scoring is engine/score.h; a
// batch's inputs (checks, encoding) engine/decode_inputs.h; text in and out is
// ordo::Translator's and ordo::Generator's (models/api/).
//
// A decode reads its forced input first, in one pass over all its tokens: decoder_start
// and any target prefix for an encoder-decoder model, the prompt for a decoder-only one.
// The search then generates from the prediction after the last of them.
//
// Beam search, per source, with K = beam_size:
//   - live beams start as one empty hypothesis; each step extends every live beam by
//     every token, ranks the candidates by their sum of log-probabilities (ties: the
//     earlier beam, then the lower id) and walks the best 2K: a candidate ending in eos
//     joins the finished pool if it ranks among the first K, any other becomes a live
//     beam until K are live;
//   - the finished pool keeps the K best by normalized score, score / length^penalty;
//   - a source is done when its beams reach max_length (they join the pool, marked
//     unfinished), or when the pool is full and the best live beam, normalized at its
//     current length, does not beat the worst finished one. That is Hugging Face's
//     default rule; it is exact for length_penalty <= 0 (scores only fall as beams
//     grow), while for a positive penalty a longer hypothesis could still overtake.
// With K = 1 this is greedy search, token for token and bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/decoding_options.h"
#include "engine/transformer.h"
#include "ordo/results.hpp"

namespace ordo {

// One source's outcome: its hypotheses, or why it could not be decoded. A batch never
// fails as a whole for one bad source.
struct DecodeResult {
  std::vector<Hypothesis> hypotheses;  // n_best of them, best first; empty on error
  std::string error;                   // empty when decoding succeeded

  bool ok() const { return error.empty(); }
};

// The buffers a decode or a scoring pass needs: encoder output and scratch, the decoder
// state with its KV caches, logits and the search's histories. Each call sizes them for
// its batch and leaves them for the next, so a stream of batches reuses the same memory
// instead of asking the allocator (and the kernel, for fresh pages) every time. A
// workspace grows to the largest batch it has served and keeps that size. Use one per
// thread at a time; ordo::Translator and ordo::Generator keep a small pool of them.
class DecodeWorkspace {
 public:
  DecodeWorkspace();
  ~DecodeWorkspace();
  DecodeWorkspace(DecodeWorkspace&&) noexcept;
  DecodeWorkspace& operator=(DecodeWorkspace&&) noexcept;

  struct Buffers;  // defined where it is used (search.cpp)
  Buffers& buffers() { return *buffers_; }

 private:
  std::unique_ptr<Buffers> buffers_;
};

// One decoding request, in token ids.
struct DecodeRequest {
  // The encoder input, eos included; empty for a decoder-only model.
  std::vector<int> source;
  // Forced decoder input: for an encoder-decoder model, a target prefix read after
  // decoder_start (usually empty); for a decoder-only model, the prompt (non-empty; bos
  // included if the model wants one). Hypotheses continue it and do not repeat it.
  std::vector<int> prefix;
};

// Called with (request index, token, its log-probability) as soon as a token is final:
// with beam_size 1 (greedy or sampling), once per generated token, eos included; never
// for wider beams, whose tokens are only final at the end.
using TokenCallback = std::function<void(std::size_t, int, float)>;

// Decodes every request as one batch. `streams` gives each request its sampling
// generator index (default: its position); give every request of a job a distinct
// one. Options are validated first (OptionError); a request that cannot be decoded
// gets its own error. `interrupt` (if set) runs before every decoder step; what it
// throws leaves the call (the workspace stays usable).
std::vector<DecodeResult> decode_requests(const Transformer& model, std::span<const DecodeRequest> requests,
                                          const DecodingOptions& options, std::span<const std::uint64_t> streams,
                                          DecodeWorkspace& workspace, const TokenCallback& on_token = {},
                                          const InterruptCheck& interrupt = {});

// The tokens `request` may generate: options.max_length as the decoder's positions allow
// for it. Throws Error when `model` cannot decode the request at all (check_request), so
// that decode_requests and ordo::ContinuousBatch fail that request alone.
Index admitted_max_length(const Transformer& model, const DecodeRequest& request, const DecodingOptions& options);

// The decoder steps a batch needs (each request's forced input, then all but the last of
// its max_lengths[i] outputs), after refusing, before anything is allocated, a batch
// whose buffers do not fit in the memory the process may still take: the decoder's state
// (KV caches) of that many steps, the search histories (ids and log-probs, twice) and
// the logits, all of batch x beam slots.
Index check_request_memory(const Transformer& model, std::span<const DecodeRequest> requests,
                           const DecodingOptions& options, std::span<const Index> max_lengths);

// Adds one run to decode_totals() (ordo/results.hpp), thread-safe.
void add_to_decode_totals(const DecodeTotals& run);

// Decodes many requests, at most `batch_size` at a time, shortest first (similar
// lengths share a batch, so there is little padding); results in input order. Request i
// samples from streams[i] (default: i) whichever batch it lands in.
// `interrupt` runs before each batch and every decoder step (decode_requests).
std::vector<DecodeResult> decode_many(const Transformer& model, std::span<const DecodeRequest> requests,
                                      const DecodingOptions& options, Index batch_size,
                                      std::span<const std::uint64_t> streams, DecodeWorkspace& workspace,
                                      const InterruptCheck& interrupt = {});

}  // namespace ordo
