#include "engine/live_batch.h"

#include <algorithm>
#include <numeric>

#include "engine/error.h"

namespace ordo {

LiveBatch::LiveBatch(const Transformer& model, DecodeWorkspace::Buffers& buffers)
    : model_(model), buffers_(buffers) {
  buffers_.state.reorder({});  // whatever an interrupted decode left live
}

void LiveBatch::reserve(Index sequences, Index steps, Index rows_per_source) {
  if (!empty()) throw Error("live batch", "reserve() needs an empty set; admit() grows a live one");
  model_.decoder.clear(buffers_.state, sequences, steps, rows_per_source);
  buffers_.logits.reserve(sequences * model_.decoder.vocab_size());
}

Index LiveBatch::sequences() const {
  Index total = 0;
  for (const Live& live : requests_) total += live.search->live();
  return total;
}

void LiveBatch::admit(std::span<const DecodeRequest> requests, std::span<const Index> max_lengths,
                      std::span<const std::uint64_t> keys, std::shared_ptr<SearchRules> rules,
                      std::span<const std::uint64_t> streams, const TokenCallback& on_token) {
  const std::size_t count = requests.size();
  if (max_lengths.size() != count || keys.size() != count || streams.size() != count)
    throw Error("live batch", std::to_string(count) + " requests with " + std::to_string(max_lengths.size()) +
                                  " lengths, " + std::to_string(keys.size()) + " keys and " +
                                  std::to_string(streams.size()) + " streams");
  if (count == 0) return;
  drop_cancelled();
  const std::size_t first_request = requests_.size();
  const Index live_before = sequences();

  Index steps = 0;
  std::vector<Live> joining;
  joining.reserve(count);
  // The requests report for as long as they live, past this call: a copy they share.
  const auto callback = on_token ? std::make_shared<const TokenCallback>(on_token) : nullptr;
  for (std::size_t i = 0; i < count; ++i) {
    RequestSearch::OnToken report;
    if (callback) report = [callback, key = keys[i]](int token, float logprob) { (*callback)(key, token, logprob); };
    auto search = std::make_unique<RequestSearch>(model_, rules, requests[i], max_lengths[i], streams[i],
                                                  std::move(report));
    steps = std::max(steps, search->steps_needed());
    joining.push_back(Live{keys[i], std::move(search)});
  }

  // Room first: a beam search branches its one prefilled sequence into beam_size.
  const Index widest = live_before + static_cast<Index>(count) * rules->options.beam_size;
  model_.decoder.grow(buffers_.state, widest, steps);
  buffers_.logits.reserve(widest * model_.decoder.vocab_size());

  // The decoder: newcomers' sources encoded as one batch, then their forced inputs
  // (decoder_start and any prefix, or the prompt) in one pass after the live ones.
  buffers_.source_of.resize(count);
  std::iota(buffers_.source_of.begin(), buffers_.source_of.end(), Index{0});
  try {
    if (model_.decoder_only()) {
      model_.decoder.admit(buffers_.state, nullptr, buffers_.source_of, steps);
    } else {
      buffers_.sources.clear();
      for (const DecodeRequest& r : requests) buffers_.sources.push_back(r.source);
      encode_sources(model_, buffers_.sources, buffers_);
      model_.decoder.admit(buffers_.state, &buffers_.memory, buffers_.source_of, steps);
    }
    const Index rows = pad_inputs(model_, requests, buffers_);
    model_.decoder.feed(buffers_.state, buffers_.inputs, rows, buffers_.input_lengths, buffers_.logits,
                        Decoder::Logits::LastRow, live_before);
  } catch (...) {  // the live set stays as it was
    parents_.resize(static_cast<std::size_t>(live_before));
    std::iota(parents_.begin(), parents_.end(), Index{0});
    buffers_.state.reorder(parents_);
    throw;
  }
  for (Live& live : joining) requests_.push_back(std::move(live));
  choose(first_request, live_before);
}

void LiveBatch::step() {
  drop_cancelled();
  if (empty()) return;
  tokens_.clear();
  for (const Live& live : requests_)
    for (Index beam = 0; beam < live.search->live(); ++beam) tokens_.push_back(live.search->last_token(beam));
  stepped_tokens_ += static_cast<Index>(tokens_.size());
  model_.decoder.step(buffers_.state, tokens_, buffers_.logits);
  choose(0, 0);
}

void LiveBatch::choose(std::size_t first_request, Index first_row) {
  // The sequences before first_row keep theirs; logits row r is sequence first_row + r.
  parents_.resize(static_cast<std::size_t>(first_row));
  std::iota(parents_.begin(), parents_.end(), Index{0});
  Index row = 0;
  for (std::size_t r = first_request; r < requests_.size();) {
    RequestSearch& search = *requests_[r].search;
    const Index beams = search.live();
    const std::size_t before = parents_.size();
    const bool goes_on = search.advance(buffers_.logits, row, parents_, scratch_);
    for (std::size_t i = before; i < parents_.size(); ++i) parents_[i] += first_row;
    row += beams;
    if (goes_on) {
      ++r;
      continue;
    }
    finished_.emplace_back(requests_[r].key, search.result());
    requests_.erase(requests_.begin() + static_cast<std::ptrdiff_t>(r));
  }
  buffers_.state.reorder(parents_);
}

void LiveBatch::cancel(std::uint64_t key) {
  for (Live& live : requests_)
    if (live.key == key) live.cancelled = true;
}

void LiveBatch::drop_cancelled() {
  if (std::none_of(requests_.begin(), requests_.end(), [](const Live& l) { return l.cancelled; })) return;
  parents_.clear();
  Index row = 0;
  std::vector<Live> kept;
  for (Live& live : requests_) {
    const Index beams = live.search->live();
    if (!live.cancelled) {
      for (Index b = 0; b < beams; ++b) parents_.push_back(row + b);
      kept.push_back(std::move(live));
    }
    row += beams;
  }
  requests_ = std::move(kept);
  buffers_.state.reorder(parents_);
}

std::vector<std::pair<std::uint64_t, DecodeResult>> LiveBatch::take_finished() {
  std::vector<std::pair<std::uint64_t, DecodeResult>> out;
  out.swap(finished_);
  return out;
}

}  // namespace ordo
