#include "engine/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <numeric>
#include <optional>

#include "engine/decode_inputs.h"
#include "engine/error.h"
#include "engine/finished_pool.h"
#include "engine/limits.h"
#include "engine/logits_processor.h"
#include "engine/memory_budget.h"
#include "engine/ops.h"
#include "engine/sampler.h"

namespace ordo {

namespace {

// Ranks candidates: higher total first; ties: the earlier beam, then the lower id.
bool better(const Candidate& a, const Candidate& b) {
  if (a.total != b.total) return a.total > b.total;
  if (a.beam != b.beam) return a.beam < b.beam;
  return a.token < b.token;
}

// One decode_requests call: the live sequences of every request, their histories, and
// the finished pools. Live sequences are kept grouped by request, in beam rank order.
class BatchSearch {
 public:
  BatchSearch(const Transformer& model, const DecodingOptions& options, std::span<const DecodeRequest> requests,
              std::span<const Index> max_lengths, std::span<const std::uint64_t> streams,
              DecodeWorkspace::Buffers& buffers, const TokenCallback& on_token)
      : model_(model),
        options_(options),
        beam_(options.beam_size),
        max_lengths_(max_lengths.begin(), max_lengths.end()),
        processor_(options, eos_ids(model.tokens), model.decoder.vocab_size()),
        sampler_(options, model.decoder.vocab_size()),
        results_(requests.size()),
        on_token_(on_token),
        buffers_(buffers) {
    const Index count = static_cast<Index>(requests.size());
    const Index slots = count * beam_;
    Index capacity = 0;  // decoder steps: the forced input, then all but the last output
    for (Index b = 0; b < count; ++b) {
      const auto& request = requests[static_cast<std::size_t>(b)];
      prefix_lengths_.push_back(static_cast<Index>(request.prefix.size()));
      capacity = std::max(capacity, decoder_input_length(model, request) + max_lengths_[static_cast<std::size_t>(b)] - 1);
      pools_.emplace_back(beam_, options.length_penalty);
      randoms_.emplace_back(options.seed, streams[static_cast<std::size_t>(b)]);
    }
    max_steps_ = *std::max_element(max_lengths.begin(), max_lengths.end());
    width_ = *std::max_element(prefix_lengths_.begin(), prefix_lengths_.end()) + max_steps_;

    check_request_memory(model, requests, slots, capacity);
    capacity_ = capacity;

    buffers_.scores.assign(static_cast<std::size_t>(count), 0.0);
    const auto history = static_cast<std::size_t>(slots * width_);
    buffers_.ids.resize(history);
    buffers_.next_ids.resize(history);
    buffers_.logprobs.resize(history);
    buffers_.next_logprobs.resize(history);
    for (Index b = 0; b < count; ++b) {
      const auto& prefix = requests[static_cast<std::size_t>(b)].prefix;
      std::copy(prefix.begin(), prefix.end(), buffers_.ids.begin() + b * width_);
    }
    for (auto* v : {&buffers_.scores, &buffers_.next_scores}) v->reserve(static_cast<std::size_t>(slots));
    for (auto* v : {&buffers_.tokens, &buffers_.next_tokens}) v->reserve(static_cast<std::size_t>(slots));
    buffers_.parents.reserve(static_cast<std::size_t>(slots));
    buffers_.next_logprob.reserve(static_cast<std::size_t>(slots));
    const Index per_beam = std::min<Index>(2 * beam_, model.decoder.vocab_size());
    buffers_.candidates.reserve(static_cast<std::size_t>(beam_ * per_beam));
    buffers_.order.resize(static_cast<std::size_t>(model.decoder.vocab_size()));
    buffers_.logits.reserve(slots * model.decoder.vocab_size());
  }

  // The requests' inputs, all at once: the encoder over the sources (encoder-decoder
  // models), then the decoder over every forced input (decoder_start and any prefix, or
  // the prompt), leaving logits [count, V] after each one's last token for run()'s first
  // choice.
  void prefill(std::span<const DecodeRequest> requests) {
    const Index count = static_cast<Index>(requests.size());
    buffers_.sources.clear();
    for (const DecodeRequest& r : requests) buffers_.sources.push_back(r.source);
    start_decoder(model_, buffers_.sources, count, buffers_, count * beam_, capacity_);
    const Index rows = pad_inputs(model_, requests, buffers_);
    model_.decoder.feed(buffers_.state, buffers_.inputs, rows, buffers_.input_lengths, buffers_.logits,
                        Decoder::Logits::LastRow);
  }

  // Refuses, before anything is allocated, a request whose buffers do not fit in the
  // memory the process may still take: the decoder's state (KV caches), the search
  // histories (ids and log-probs, twice) and the logits, all of batch x beam slots.
  void check_request_memory(const Transformer& model, std::span<const DecodeRequest> requests, Index slots,
                            Index capacity) const {
    const auto n = [](Index x) { return static_cast<std::uint64_t>(std::max<Index>(x, 0)); };
    const Index count = static_cast<Index>(requests.size());
    const Index source_rows = longest(requests, [](const DecodeRequest& r) { return static_cast<Index>(r.source.size()); });
    const std::uint64_t needed =
        model.decoder.state_bytes(slots, capacity, model.decoder_only() ? 0 : count, source_rows) +
        n(slots) * n(width_) * 2 * (sizeof(int) + sizeof(float)) +          // histories
        n(slots) * n(model.decoder.vocab_size()) * sizeof(float);            // logits
    check_memory("decoding", needed,
                 std::to_string(count) + (count == 1 ? " input" : " inputs") + " x beam " + std::to_string(beam_) +
                     " x max length " + std::to_string(max_steps_),
                 "lower --beam or --max-length (or --batch-size; in the library DecodingOptions::beam_size, "
                 "max_length)");
  }

  // Tokens the decoder has read one step at a time (every live sequence's, every step
  // after the forced input): what the decode rate counts.
  Index stepped_tokens() const { return stepped_tokens_; }

  std::vector<DecodeResult> run() {
    for (Index step = 0; buffers_.state.sequences() > 0; ++step) {
      if (step > 0) {
        stepped_tokens_ += buffers_.state.sequences();
        buffers_.tokens.clear();
        for (Index s = 0; s < buffers_.state.sequences(); ++s)
          buffers_.tokens.push_back(generated_ids(s, step)[step - 1]);
        model_.decoder.step(buffers_.state, buffers_.tokens, buffers_.logits);
      }

      buffers_.parents.clear();
      buffers_.next_tokens.clear();
      buffers_.next_logprob.clear();
      buffers_.next_scores.clear();
      // Live sequences are grouped by request: [first, last) share one.
      for (Index first = 0; first < buffers_.state.sequences();) {
        const Index source = buffers_.state.source_of(first);
        Index last = first;
        while (last < buffers_.state.sequences() && buffers_.state.source_of(last) == source) ++last;
        advance(source, first, last, step);
        first = last;
      }
      follow_parents(step);
    }
    for (std::size_t b = 0; b < results_.size(); ++b) {
      DecodeResult& result = results_[b];
      if (!result.ok()) continue;
      result.hypotheses = pools_[b].take_best(options_.n_best);
      if (result.hypotheses.empty())
        result.error =
            "decoder: no output satisfies the constraints (every token was impossible at some "
            "step; relax min_length or no_repeat_ngram_size)";
    }
    return std::move(results_);
  }

 private:
  Index prefix_length(Index s) const { return prefix_lengths_[static_cast<std::size_t>(buffers_.state.source_of(s))]; }

  // Live sequence s's context after `step` generated tokens: its prefix, then them.
  std::span<const int> context_ids(Index s, Index step) const {
    return std::span<const int>(buffers_.ids).subspan(static_cast<std::size_t>(s * width_),
                                              static_cast<std::size_t>(prefix_length(s) + step));
  }
  std::span<const int> generated_ids(Index s, Index step) const {
    return context_ids(s, step).subspan(static_cast<std::size_t>(prefix_length(s)));
  }
  std::span<const float> generated_logprobs(Index s, Index step) const {
    return std::span<const float>(buffers_.logprobs)
        .subspan(static_cast<std::size_t>(s * width_), static_cast<std::size_t>(step));
  }

  Hypothesis hypothesis(Index s, Index step, int token, float logprob, double total, bool finished) const {
    Hypothesis h;
    const auto ids = generated_ids(s, step);
    const auto lps = generated_logprobs(s, step);
    h.ids.assign(ids.begin(), ids.end());
    h.ids.push_back(token);
    h.token_logprobs.assign(lps.begin(), lps.end());
    h.token_logprobs.push_back(logprob);
    h.score = total;
    h.finished = finished;
    return h;
  }

  void keep(Index parent, int token, float logprob, double total) {
    buffers_.parents.push_back(parent);
    buffers_.next_tokens.push_back(token);
    buffers_.next_logprob.push_back(logprob);
    buffers_.next_scores.push_back(total);
  }

  // The kept candidates become the live set: new sequence i continues parents[i] with
  // its chosen token. Everything a sequence has moves with it in this one place: its
  // history row (ids and log-probs, the new token appended), its score, and its decoder
  // state (KV caches, steps, source; DecoderState::reorder).
  void follow_parents(Index step) {
    for (std::size_t i = 0; i < buffers_.parents.size(); ++i) {
      const Index parent = buffers_.parents[i];
      const auto context = context_ids(parent, step);
      const auto to = static_cast<std::ptrdiff_t>(i) * width_;
      std::copy(context.begin(), context.end(), buffers_.next_ids.begin() + to);
      buffers_.next_ids[static_cast<std::size_t>(to) + context.size()] = buffers_.next_tokens[i];
      const auto lps = generated_logprobs(parent, step);
      std::copy(lps.begin(), lps.end(), buffers_.next_logprobs.begin() + to);
      buffers_.next_logprobs[static_cast<std::size_t>(to + step)] = buffers_.next_logprob[i];
    }
    buffers_.ids.swap(buffers_.next_ids);
    buffers_.logprobs.swap(buffers_.next_logprobs);
    buffers_.scores.swap(buffers_.next_scores);
    buffers_.state.reorder(buffers_.parents);
  }

  // One step of request `source`, whose live sequences are [first, last).
  void advance(Index source, Index first, Index last, Index step) {
    const auto b = static_cast<std::size_t>(source);
    try {
      for (Index s = first; s < last; ++s) processor_.process(buffers_.logits.row(s), context_ids(s, step), step);
    } catch (const Error& e) {  // this request fails; the batch goes on
      results_[b].error = e.what();
      return;
    }
    const Index length = step + 1;  // of every hypothesis made now
    const std::size_t kept_before = buffers_.parents.size();
    if (options_.sample) {
      const int token = sampler_.draw(buffers_.logits.row(first), randoms_[b]);
      const float logprob = buffers_.logits(first, token);
      const double total = buffers_.scores[static_cast<std::size_t>(first)] + logprob;
      if (on_token_) on_token_(b, token);
      if (model_.tokens.is_eos(token))
        pools_[b].offer(hypothesis(first, step, token, logprob, total, true));
      else
        keep(first, token, logprob, total);
    } else {
      select_beams(b, first, last, step);
    }

    // Done? Beams at max_length join the pool unfinished; otherwise stop when no live
    // beam, normalized at its current length, beats the worst finished hypothesis.
    const std::size_t kept = buffers_.parents.size() - kept_before;
    bool done = kept == 0;
    if (!done && length >= max_lengths_[b]) {
      for (std::size_t i = kept_before; i < buffers_.parents.size(); ++i)
        pools_[b].offer(hypothesis(buffers_.parents[i], step, buffers_.next_tokens[i], buffers_.next_logprob[i],
                                   buffers_.next_scores[i], false));
      done = true;
    } else if (!done && pools_[b].full()) {
      const double best_live = *std::max_element(
          buffers_.next_scores.begin() + static_cast<std::ptrdiff_t>(kept_before), buffers_.next_scores.end());
      done = pools_[b].normalize(best_live, length) <= pools_[b].worst();
    }
    if (done) {
      buffers_.parents.resize(kept_before);
      buffers_.next_tokens.resize(kept_before);
      buffers_.next_logprob.resize(kept_before);
      buffers_.next_scores.resize(kept_before);
    }
  }

  // Beam search's step for one request: rank the candidates, keep K live beams, send
  // eos candidates ranked among the first K to the pool.
  void select_beams(std::size_t b, Index first, Index last, Index step) {
    const Index vocab = model_.decoder.vocab_size();
    const Index per_beam = std::min<Index>(2 * beam_, vocab);
    buffers_.candidates.clear();
    for (Index s = first; s < last; ++s) {
      // A beam's best 2K tokens hold every candidate of it that can rank in the top 2K.
      const std::span<const float> row = buffers_.logits.row(s);
      std::size_t possible = 0;
      for (Index v = 0; v < vocab; ++v)
        if (row[static_cast<std::size_t>(v)] != -INFINITY) buffers_.order[possible++] = static_cast<int>(v);
      const auto by_logprob = [&](int x, int y) {
        const float a = row[static_cast<std::size_t>(x)], c = row[static_cast<std::size_t>(y)];
        return a > c || (a == c && x < y);
      };
      const auto take = std::min(possible, static_cast<std::size_t>(per_beam));
      std::partial_sort(buffers_.order.begin(), buffers_.order.begin() + static_cast<std::ptrdiff_t>(take),
                        buffers_.order.begin() + static_cast<std::ptrdiff_t>(possible), by_logprob);
      for (std::size_t i = 0; i < take; ++i) {
        const int token = buffers_.order[i];
        const float logprob = row[static_cast<std::size_t>(token)];
        buffers_.candidates.push_back(
            {buffers_.scores[static_cast<std::size_t>(s)] + logprob, s - first, token, logprob});
      }
    }
    const auto considered = std::min(buffers_.candidates.size(), static_cast<std::size_t>(2 * beam_));
    std::partial_sort(buffers_.candidates.begin(), buffers_.candidates.begin() + static_cast<std::ptrdiff_t>(considered),
                      buffers_.candidates.end(), better);
    // With one beam the best candidate is the token chosen, final at once.
    if (beam_ == 1 && on_token_ && considered > 0) on_token_(b, buffers_.candidates.front().token);
    Index live = 0;
    for (std::size_t rank = 0; rank < considered && live < beam_; ++rank) {
      const Candidate& c = buffers_.candidates[rank];
      if (model_.tokens.is_eos(c.token)) {
        if (static_cast<Index>(rank) < beam_)
          pools_[b].offer(hypothesis(first + c.beam, step, c.token, c.logprob, c.total, true));
      } else {
        keep(first + c.beam, c.token, c.logprob, c.total);
        ++live;
      }
    }
  }

  const Transformer& model_;
  const DecodingOptions& options_;
  Index beam_;
  std::vector<Index> max_lengths_;     // per request
  std::vector<Index> prefix_lengths_;  // per request
  Index max_steps_ = 0;                // the longest max_length
  Index width_ = 0;                    // of a history row: longest prefix + max_steps_
  LogitsProcessor processor_;
  Sampler sampler_;
  std::vector<FinishedPool> pools_;      // per request
  std::vector<SequenceRandom> randoms_;  // per request (sampling has one sequence each)
  std::vector<DecodeResult> results_;
  const TokenCallback& on_token_;
  Index stepped_tokens_ = 0;
  // The workspace's buffers, which the search fills and reuses (DecodeWorkspace::Buffers).
  DecodeWorkspace::Buffers& buffers_;
  Index capacity_ = 0;  // decoder steps per sequence: the forced input, then all but the last output
};

}  // namespace

std::vector<DecodeResult> decode_requests(const Transformer& model, std::span<const DecodeRequest> requests,
                                          const DecodingOptions& options, std::span<const std::uint64_t> streams,
                                          DecodeWorkspace& workspace, const TokenCallback& on_token) {
  options.validate();
  if (!streams.empty() && streams.size() != requests.size())
    throw Error("decode", std::to_string(streams.size()) + " sampling streams for " +
                              std::to_string(requests.size()) + " requests");
  // Lengths the decoder cannot honour at all fail the call, not each request.
  resolve_max_length(options, model.decoder, model.decoder_only() ? 0 : 1, 1);

  std::vector<DecodeResult> results(requests.size());
  std::vector<DecodeRequest> valid;
  std::vector<Index> max_lengths;
  std::vector<std::uint64_t> valid_streams;
  std::vector<std::size_t> origin;  // valid -> index in requests
  for (std::size_t i = 0; i < requests.size(); ++i) {
    try {
      check_request(model, requests[i]);
      max_lengths.push_back(resolve_max_length(options, model.decoder, static_cast<Index>(requests[i].source.size()),
                                                       decoder_input_length(model, requests[i])));
    } catch (const Error& e) {
      results[i].error = e.what();
      continue;
    }
    valid.push_back(requests[i]);
    valid_streams.push_back(streams.empty() ? i : streams[i]);
    origin.push_back(i);
  }
  if (valid.empty()) return results;
  TokenCallback report;
  if (on_token) report = [&](std::size_t v, int token) { on_token(origin[v], token); };
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  BatchSearch search(model, options, valid, max_lengths, valid_streams, workspace.buffers(), report);
  search.prefill(valid);
  const auto prefilled = Clock::now();
  std::vector<DecodeResult> decoded = search.run();
  DecodeTotals run;
  for (const DecodeRequest& r : valid) run.input_tokens += static_cast<Index>(r.source.size() + r.prefix.size());
  run.prefill_seconds = std::chrono::duration<double>(prefilled - started).count();
  run.stepped_tokens = search.stepped_tokens();
  run.decode_seconds = std::chrono::duration<double>(Clock::now() - prefilled).count();
  for (const DecodeResult& r : decoded)
    if (r.ok()) run.output_tokens += static_cast<Index>(r.hypotheses.front().ids.size());
  add_to_decode_totals(run);
  for (std::size_t v = 0; v < valid.size(); ++v) results[origin[v]] = std::move(decoded[v]);
  return results;
}

namespace {
std::mutex totals_mutex;
DecodeTotals totals;
}  // namespace

void add_to_decode_totals(const DecodeTotals& run) {
  const std::lock_guard<std::mutex> lock(totals_mutex);
  totals.input_tokens += run.input_tokens;
  totals.prefill_seconds += run.prefill_seconds;
  totals.stepped_tokens += run.stepped_tokens;
  totals.decode_seconds += run.decode_seconds;
  totals.output_tokens += run.output_tokens;
}

DecodeTotals decode_totals() noexcept {
  const std::lock_guard<std::mutex> lock(totals_mutex);
  return totals;
}

std::vector<DecodeResult> decode_many(const Transformer& model, std::span<const DecodeRequest> requests,
                                      const DecodingOptions& options, Index batch_size,
                                      std::span<const std::uint64_t> streams, DecodeWorkspace& workspace) {
  if (!streams.empty() && streams.size() != requests.size())
    throw Error("decode", std::to_string(streams.size()) + " sampling streams for " +
                              std::to_string(requests.size()) + " requests");
  check_batch_size(batch_size);
  const auto length = [&](std::size_t i) { return requests[i].source.size() + requests[i].prefix.size(); };
  std::vector<std::size_t> order(requests.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return length(a) < length(b); });
  std::vector<DecodeResult> results(requests.size());
  const auto batch = static_cast<std::size_t>(batch_size);
  std::vector<DecodeRequest> chunk;
  std::vector<std::uint64_t> chunk_streams;
  for (std::size_t first = 0; first < order.size(); first += batch) {
    const std::size_t count = std::min(batch, order.size() - first);
    chunk.clear();
    chunk_streams.clear();
    for (std::size_t k = first; k < first + count; ++k) {
      chunk.push_back(requests[order[k]]);
      chunk_streams.push_back(streams.empty() ? order[k] : streams[order[k]]);
    }
    std::vector<DecodeResult> decoded = decode_requests(model, chunk, options, chunk_streams, workspace);
    for (std::size_t k = 0; k < count; ++k) results[order[first + k]] = std::move(decoded[k]);
  }
  return results;
}

}  // namespace ordo
