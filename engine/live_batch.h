// A live set of requests decoded together, step by step: continuous batching.
//
// Requests join between decoder steps (admit: the encoder over their sources, one
// prefill over their forced inputs, their first choice) and leave when they finish;
// every step() feeds each live beam of every request its last token in one decoder
// step, then lets each request choose from its own rows (engine/request_search.h).
// Requests keep their own options, lengths and sampling streams, so what one request
// decodes does not depend on what else is live, beyond the float rounding of a
// different batch shape.
//
//   LiveBatch live(model, buffers);
//   live.admit(requests, max_lengths, keys, rules, streams);   // any time between steps
//   while (!live.empty()) {
//     live.step();
//     for (auto& [key, result] : live.take_finished()) ...;
//   }
//
// decode_requests (search.h) is one admit() of a whole batch and steps until it is
// empty; a server admits requests as they arrive.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "engine/request_search.h"

namespace ordo {

class LiveBatch {
 public:
  // An empty live set on `model`, whose decoder state and logits live in `buffers`
  // (a workspace's; both must outlive the set, and nobody else may use the buffers
  // while it does).
  LiveBatch(const Transformer& model, DecodeWorkspace::Buffers& buffers);

  // Sizes the decoder state for `sequences` live sequences of up to `steps` decoder
  // steps (and sources of up to rows_per_source rows), so that admitting up to that
  // allocates nothing. The set must be empty. Optional: admit() grows what it needs.
  void reserve(Index sequences, Index steps, Index rows_per_source = 0);

  // Admits requests together (each checked by check_request, with its max_length from
  // resolve_max_length): their sources encoded as one batch, their forced inputs
  // prefilled in one pass, their first tokens chosen. Request i is known by keys[i]
  // from then on, samples from streams[i], and reports its final tokens to on_token
  // (with its key). Some may finish at once (take_finished()).
  void admit(std::span<const DecodeRequest> requests, std::span<const Index> max_lengths,
             std::span<const std::uint64_t> keys, std::shared_ptr<SearchRules> rules,
             std::span<const std::uint64_t> streams, const TokenCallback& on_token = {});

  // One decoder step for every live request, and each one's next choice.
  void step();

  // Drops request `key` (a client gone) before the next step; its result is not
  // reported. Unknown keys are ignored.
  void cancel(std::uint64_t key);

  bool empty() const { return requests_.empty(); }
  // Live requests and their live decoder sequences (beams).
  Index requests() const { return static_cast<Index>(requests_.size()); }
  Index sequences() const;
  // Tokens the decoder has read one step at a time, every live sequence's, so far.
  Index stepped_tokens() const { return stepped_tokens_; }

  // The requests finished since the last call, with their keys, in the order they
  // finished.
  std::vector<std::pair<std::uint64_t, DecodeResult>> take_finished();

 private:
  struct Live {
    std::uint64_t key;
    std::unique_ptr<RequestSearch> search;
    bool cancelled = false;
  };

  // Each request chooses from its rows of logits (the live ones before `first_row`
  // keep their rows as they are); the decoder state then follows the survivors.
  void choose(std::size_t first_request, Index first_row);
  void drop_cancelled();

  const Transformer& model_;
  DecodeWorkspace::Buffers& buffers_;
  std::vector<Live> requests_;  // in the order of their sequences in the decoder state
  std::vector<std::pair<std::uint64_t, DecodeResult>> finished_;
  SearchScratch scratch_;
  std::vector<Index> parents_;
  std::vector<int> tokens_;
  Index stepped_tokens_ = 0;
};

}  // namespace ordo
