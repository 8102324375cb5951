#include "engine/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <numeric>
#include <optional>

#include "engine/error.h"
#include "engine/finished_pool.h"
#include "engine/limits.h"
#include "engine/logits_processor.h"
#include "engine/memory_budget.h"
#include "engine/ops.h"
#include "engine/sampler.h"

namespace ordo {

namespace {

// Checks ids against a vocabulary before they reach an embedding lookup, so the error
// says which input was at fault.
void check_ids(std::span<const int> ids, Index vocab_size, const char* what) {
  if (ids.empty()) throw Error(what, "is empty", "give at least one token id");
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw Error(what, "id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                            " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
}

template <class Sequences, class Length>
Index longest(const Sequences& sequences, Length length) {
  Index most = 0;
  for (const auto& s : sequences) most = std::max(most, length(s));
  return most;
}

Index longest(std::span<const std::vector<int>> sequences) {
  return longest(sequences, [](const std::vector<int>& s) { return static_cast<Index>(s.size()); });
}

// One sequence as a batch of one, for the single-source conveniences.
std::vector<std::vector<int>> batch_of_one(std::span<const int> ids) {
  return {std::vector<int>(ids.begin(), ids.end())};
}

// Every id that ends a hypothesis.
std::vector<int> eos_ids(const SpecialTokens& tokens) {
  std::vector<int> ids{tokens.eos};
  ids.insert(ids.end(), tokens.other_eos.begin(), tokens.other_eos.end());
  return ids;
}

// How many tokens the decoder reads before its first prediction for `request`.
Index decoder_input_length(const Transformer& model, const DecodeRequest& request) {
  return static_cast<Index>(request.prefix.size()) + (model.decoder_only() ? 0 : 1);
}

// A candidate extension during a beam step.
struct Candidate {
  double total;  // the beam's score + this token's log-prob
  Index beam;    // rank of the beam among its source's live beams
  int token;
  float logprob;
};

bool better(const Candidate& a, const Candidate& b) {
  if (a.total != b.total) return a.total > b.total;
  if (a.beam != b.beam) return a.beam < b.beam;
  return a.token < b.token;
}

}  // namespace

struct DecodeWorkspace::Buffers {
  // Encoding.
  std::vector<std::vector<int>> sources;
  std::vector<int> padded_ids;  // [B*L]
  EncoderWorkspace encoder;
  EncodedBatch memory;
  // Decoding.
  DecoderState state;
  Matrix logits;
  std::vector<Index> source_of;
  std::vector<int> inputs;      // the forced decoder inputs, padded [B*T]
  std::vector<Index> input_lengths;
  // Search, per live sequence: score; [slots, width] histories of the context (prefix,
  // then generated ids) and of the generated tokens' log-probs; this step's survivors
  // (parent, new token, its log-prob); candidates.
  std::vector<double> scores, next_scores;
  std::vector<int> ids, next_ids;
  std::vector<float> logprobs, next_logprobs;
  std::vector<Index> parents;
  std::vector<int> tokens, next_tokens;
  std::vector<float> next_logprob;
  std::vector<Candidate> candidates;
  std::vector<int> order;  // [V] scratch
};

DecodeWorkspace::DecodeWorkspace() : buffers_(std::make_unique<Buffers>()) {}
DecodeWorkspace::~DecodeWorkspace() = default;
DecodeWorkspace::DecodeWorkspace(DecodeWorkspace&&) noexcept = default;
DecodeWorkspace& DecodeWorkspace::operator=(DecodeWorkspace&&) noexcept = default;

namespace {

// The encoder output of a batch of checked sources, padded to the longest, into
// `buffers.memory`.
void encode_into(const Transformer& model, std::span<const std::vector<int>> sources,
                 DecodeWorkspace::Buffers& buffers) {
  if (!model.encoder) throw Error("encoder", "this model is decoder-only: it has no encoder");
  EncodedBatch& out = buffers.memory;
  const Index count = static_cast<Index>(sources.size());
  out.rows_per_source = longest(sources);
  out.lengths.clear();
  // Padding rows hold the pad id: a valid id, whose rows no real token ever reads.
  buffers.padded_ids.assign(static_cast<std::size_t>(count * out.rows_per_source), model.tokens.pad);
  for (Index b = 0; b < count; ++b) {
    const auto& source = sources[static_cast<std::size_t>(b)];
    check_source(model, source);
    std::copy(source.begin(), source.end(), buffers.padded_ids.begin() + b * out.rows_per_source);
    out.lengths.push_back(static_cast<Index>(source.size()));
  }
  const std::vector<Index> first_steps(sources.size(), 0);
  model.encoder->encode(buffers.padded_ids, BatchRows{out.rows_per_source, first_steps, out.lengths},
                        buffers.encoder, out.states);
}

// Opens one live sequence per request (encoding the sources of an encoder-decoder
// model first), with room for max_sequences of max_steps tokens.
void start_decoder(const Transformer& model, std::span<const std::vector<int>> sources, Index requests,
                   DecodeWorkspace::Buffers& buffers, Index max_sequences, Index max_steps) {
  buffers.source_of.resize(static_cast<std::size_t>(requests));
  std::iota(buffers.source_of.begin(), buffers.source_of.end(), Index{0});
  if (model.decoder_only()) {
    model.decoder.start(buffers.state, buffers.source_of, max_sequences, max_steps);
  } else {
    encode_into(model, sources, buffers);
    model.decoder.start(buffers.state, buffers.memory, buffers.source_of, max_sequences, max_steps);
  }
}

// Lays out every request's forced decoder input in buffers.inputs [B*T] (T the
// longest), padded with pad; lengths in buffers.input_lengths. Returns T.
Index pad_inputs(const Transformer& model, std::span<const DecodeRequest> requests, DecodeWorkspace::Buffers& buffers) {
  const Index width = longest(requests, [&](const DecodeRequest& r) { return decoder_input_length(model, r); });
  buffers.inputs.assign(static_cast<std::size_t>(width) * requests.size(), model.tokens.pad);
  buffers.input_lengths.clear();
  for (std::size_t b = 0; b < requests.size(); ++b) {
    auto at = buffers.inputs.begin() + static_cast<std::ptrdiff_t>(b) * width;
    if (!model.decoder_only()) *at++ = model.tokens.decoder_start;
    std::copy(requests[b].prefix.begin(), requests[b].prefix.end(), at);
    buffers.input_lengths.push_back(decoder_input_length(model, requests[b]));
  }
  return width;
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
        state_(buffers.state),
        logits_(buffers.logits),
        scores_(buffers.scores),
        next_scores_(buffers.next_scores),
        ids_(buffers.ids),
        next_ids_(buffers.next_ids),
        logprobs_(buffers.logprobs),
        next_logprobs_(buffers.next_logprobs),
        parents_(buffers.parents),
        tokens_(buffers.tokens),
        next_tokens_(buffers.next_tokens),
        next_logprob_(buffers.next_logprob),
        candidates_(buffers.candidates),
        order_(buffers.order) {
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
    buffers.sources.clear();
    for (const DecodeRequest& r : requests) buffers.sources.push_back(r.source);
    start_decoder(model, buffers.sources, count, buffers, slots, capacity);

    scores_.assign(static_cast<std::size_t>(count), 0.0);
    const auto history = static_cast<std::size_t>(slots * width_);
    ids_.resize(history);
    next_ids_.resize(history);
    logprobs_.resize(history);
    next_logprobs_.resize(history);
    for (Index b = 0; b < count; ++b) {
      const auto& prefix = requests[static_cast<std::size_t>(b)].prefix;
      std::copy(prefix.begin(), prefix.end(), ids_.begin() + b * width_);
    }
    for (auto* v : {&scores_, &next_scores_}) v->reserve(static_cast<std::size_t>(slots));
    for (auto* v : {&tokens_, &next_tokens_}) v->reserve(static_cast<std::size_t>(slots));
    parents_.reserve(static_cast<std::size_t>(slots));
    next_logprob_.reserve(static_cast<std::size_t>(slots));
    const Index per_beam = std::min<Index>(2 * beam_, model.decoder.vocab_size());
    candidates_.reserve(static_cast<std::size_t>(beam_ * per_beam));
    order_.resize(static_cast<std::size_t>(model.decoder.vocab_size()));
    logits_.reserve(slots * model.decoder.vocab_size());

    // The forced inputs, all at once: logits [count, V] after each one's last token.
    const Index rows = pad_inputs(model, requests, buffers);
    model.decoder.feed(state_, buffers.inputs, rows, buffers.input_lengths, logits_, Decoder::Logits::LastRow);
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
    for (Index step = 0; state_.sequences() > 0; ++step) {
      if (step > 0) {
        stepped_tokens_ += state_.sequences();
        tokens_.clear();
        for (Index s = 0; s < state_.sequences(); ++s) tokens_.push_back(generated_ids(s, step)[step - 1]);
        model_.decoder.step(state_, tokens_, logits_);
      }

      parents_.clear();
      next_tokens_.clear();
      next_logprob_.clear();
      next_scores_.clear();
      // Live sequences are grouped by request: [first, last) share one.
      for (Index first = 0; first < state_.sequences();) {
        const Index source = state_.source_of(first);
        Index last = first;
        while (last < state_.sequences() && state_.source_of(last) == source) ++last;
        advance(source, first, last, step);
        first = last;
      }
      // The histories follow their parents, then the decoder state does.
      for (std::size_t i = 0; i < parents_.size(); ++i) {
        const Index parent = parents_[i];
        const auto context = context_ids(parent, step);
        const auto to = static_cast<std::ptrdiff_t>(i) * width_;
        std::copy(context.begin(), context.end(), next_ids_.begin() + to);
        next_ids_[static_cast<std::size_t>(to) + context.size()] = next_tokens_[i];
        const auto lps = generated_logprobs(parent, step);
        std::copy(lps.begin(), lps.end(), next_logprobs_.begin() + to);
        next_logprobs_[static_cast<std::size_t>(to + step)] = next_logprob_[i];
      }
      ids_.swap(next_ids_);
      logprobs_.swap(next_logprobs_);
      scores_.swap(next_scores_);
      state_.reorder(parents_);
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
  Index prefix_length(Index s) const { return prefix_lengths_[static_cast<std::size_t>(state_.source_of(s))]; }

  // Live sequence s's context after `step` generated tokens: its prefix, then them.
  std::span<const int> context_ids(Index s, Index step) const {
    return std::span<const int>(ids_).subspan(static_cast<std::size_t>(s * width_),
                                              static_cast<std::size_t>(prefix_length(s) + step));
  }
  std::span<const int> generated_ids(Index s, Index step) const {
    return context_ids(s, step).subspan(static_cast<std::size_t>(prefix_length(s)));
  }
  std::span<const float> generated_logprobs(Index s, Index step) const {
    return std::span<const float>(logprobs_).subspan(static_cast<std::size_t>(s * width_), static_cast<std::size_t>(step));
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
    parents_.push_back(parent);
    next_tokens_.push_back(token);
    next_logprob_.push_back(logprob);
    next_scores_.push_back(total);
  }

  // One step of request `source`, whose live sequences are [first, last).
  void advance(Index source, Index first, Index last, Index step) {
    const auto b = static_cast<std::size_t>(source);
    try {
      for (Index s = first; s < last; ++s) processor_.process(logits_.row(s), context_ids(s, step), step);
    } catch (const Error& e) {  // this request fails; the batch goes on
      results_[b].error = e.what();
      return;
    }
    const Index length = step + 1;  // of every hypothesis made now
    const std::size_t kept_before = parents_.size();
    if (options_.sample) {
      const int token = sampler_.draw(logits_.row(first), randoms_[b]);
      const float logprob = logits_(first, token);
      const double total = scores_[static_cast<std::size_t>(first)] + logprob;
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
    const std::size_t kept = parents_.size() - kept_before;
    bool done = kept == 0;
    if (!done && length >= max_lengths_[b]) {
      for (std::size_t i = kept_before; i < parents_.size(); ++i)
        pools_[b].offer(hypothesis(parents_[i], step, next_tokens_[i], next_logprob_[i], next_scores_[i], false));
      done = true;
    } else if (!done && pools_[b].full()) {
      const double best_live = *std::max_element(next_scores_.begin() + static_cast<std::ptrdiff_t>(kept_before), next_scores_.end());
      done = pools_[b].normalize(best_live, length) <= pools_[b].worst();
    }
    if (done) {
      parents_.resize(kept_before);
      next_tokens_.resize(kept_before);
      next_logprob_.resize(kept_before);
      next_scores_.resize(kept_before);
    }
  }

  // Beam search's step for one request: rank the candidates, keep K live beams, send
  // eos candidates ranked among the first K to the pool.
  void select_beams(std::size_t b, Index first, Index last, Index step) {
    const Index vocab = model_.decoder.vocab_size();
    const Index per_beam = std::min<Index>(2 * beam_, vocab);
    candidates_.clear();
    for (Index s = first; s < last; ++s) {
      // A beam's best 2K tokens hold every candidate of it that can rank in the top 2K.
      const std::span<const float> row = logits_.row(s);
      std::size_t possible = 0;
      for (Index v = 0; v < vocab; ++v)
        if (row[static_cast<std::size_t>(v)] != -INFINITY) order_[possible++] = static_cast<int>(v);
      const auto by_logprob = [&](int x, int y) {
        const float a = row[static_cast<std::size_t>(x)], c = row[static_cast<std::size_t>(y)];
        return a > c || (a == c && x < y);
      };
      const auto take = std::min(possible, static_cast<std::size_t>(per_beam));
      std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(take),
                        order_.begin() + static_cast<std::ptrdiff_t>(possible), by_logprob);
      for (std::size_t i = 0; i < take; ++i) {
        const int token = order_[i];
        const float logprob = row[static_cast<std::size_t>(token)];
        candidates_.push_back({scores_[static_cast<std::size_t>(s)] + logprob, s - first, token, logprob});
      }
    }
    const auto considered = std::min(candidates_.size(), static_cast<std::size_t>(2 * beam_));
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(considered),
                      candidates_.end(), better);
    // With one beam the best candidate is the token chosen, final at once.
    if (beam_ == 1 && on_token_ && considered > 0) on_token_(b, candidates_.front().token);
    Index live = 0;
    for (std::size_t rank = 0; rank < considered && live < beam_; ++rank) {
      const Candidate& c = candidates_[rank];
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
  // The workspace's buffers (see DecodeWorkspace::Buffers).
  DecoderState& state_;
  Matrix& logits_;
  std::vector<double>& scores_;
  std::vector<double>& next_scores_;
  std::vector<int>& ids_;
  std::vector<int>& next_ids_;
  std::vector<float>& logprobs_;
  std::vector<float>& next_logprobs_;
  std::vector<Index>& parents_;
  std::vector<int>& tokens_;
  std::vector<int>& next_tokens_;
  std::vector<float>& next_logprob_;
  std::vector<Candidate>& candidates_;
  std::vector<int>& order_;
};

// Throws Error unless `request` can be decoded by `model`.
void check_request(const Transformer& model, const DecodeRequest& request) {
  if (model.decoder_only()) {
    if (!request.source.empty())
      throw Error("source", "this model is decoder-only: it continues a prompt and reads no source",
                  "give the text as a prompt");
    check_ids(request.prefix, model.decoder.vocab_size(), "prompt");
  } else {
    check_source(model, request.source);
    if (!request.prefix.empty()) check_ids(request.prefix, model.decoder.vocab_size(), "target prefix");
  }
  check_sequence_length("decoder", "the prompt", decoder_input_length(model, request), "shorten the prompt");
}

}  // namespace

void check_source(const Transformer& model, std::span<const int> source) {
  if (!model.encoder)
    throw Error("source", "this model is decoder-only: it has no encoder to read a source", "give a prompt instead");
  const Embedding& embedding = model.encoder->embedding();
  if (source.empty()) throw Error("encoder", "the source is empty", "give at least one token");
  check_sequence_length("encoder", "the source", static_cast<Index>(source.size()), "split the input into sentences");
  check_ids(source, embedding.vocab_size(), "source");
  embedding.check_length(static_cast<Index>(source.size()));
}

EncodedBatch encode_batch(const Transformer& model, std::span<const std::vector<int>> sources) {
  DecodeWorkspace workspace;
  encode_into(model, sources, workspace.buffers());
  return std::move(workspace.buffers().memory);
}

Matrix encode(const Transformer& model, std::span<const int> source) {
  EncodedBatch out = encode_batch(model, batch_of_one(source));
  return std::move(out.states);
}

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
  BatchSearch search(model, options, valid, max_lengths, valid_streams, workspace.buffers(), report);  // prefill
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

std::vector<DecodeResult> decode_batch(const Transformer& model, std::span<const std::vector<int>> sources,
                                       const DecodingOptions& options, std::span<const std::uint64_t> streams) {
  DecodeWorkspace workspace;
  return decode_batch(model, sources, options, streams, workspace);
}

std::vector<DecodeResult> decode_batch(const Transformer& model, std::span<const std::vector<int>> sources,
                                       const DecodingOptions& options, std::span<const std::uint64_t> streams,
                                       DecodeWorkspace& workspace) {
  std::vector<DecodeRequest> requests(sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) requests[i].source = sources[i];
  return decode_requests(model, requests, options, streams, workspace);
}

std::vector<Hypothesis> decode(const Transformer& model, std::span<const int> source, const DecodingOptions& options) {
  DecodeResult result = std::move(decode_batch(model, batch_of_one(source), options).front());
  if (!result.ok()) throw Error(result.error);
  return std::move(result.hypotheses);
}

std::vector<Score> score_batch(const Transformer& model, std::span<const std::vector<int>> sources,
                                     std::span<const std::vector<int>> targets) {
  DecodeWorkspace workspace;
  return score_batch(model, sources, targets, workspace);
}

std::vector<Score> score_batch(const Transformer& model, std::span<const std::vector<int>> sources,
                                     std::span<const std::vector<int>> targets, DecodeWorkspace& workspace) {
  const bool decoder_only = model.decoder_only();
  if (decoder_only && !sources.empty())
    throw Error("score", "this model is decoder-only: it scores a sequence on its own, without sources");
  if (!decoder_only && sources.size() != targets.size())
    throw Error("score_batch", std::to_string(sources.size()) + " sources for " + std::to_string(targets.size()) + " targets");
  // The decoder reads [decoder_start, target[0..n-2]] and predicts target[0..n-1]; a
  // decoder-only model reads target[0..n-2] and predicts target[1..n-1].
  const std::size_t skipped = decoder_only ? 1 : 0;  // leading target tokens not predicted
  std::vector<Score> results(targets.size());
  std::vector<std::vector<int>> valid_sources;
  std::vector<const std::vector<int>*> valid_targets;
  std::vector<std::size_t> origin;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    // The ids scored, whether or not scoring succeeds: the caller's input, named.
    if (targets[i].size() > skipped) results[i].ids.assign(targets[i].begin() + static_cast<std::ptrdiff_t>(skipped), targets[i].end());
    try {
      if (!decoder_only) check_source(model, sources[i]);
      check_ids(targets[i], model.decoder.vocab_size(), "target");
      if (decoder_only && targets[i].size() < 2)
        throw Error("target", "has " + std::to_string(targets[i].size()) +
                                  " token; a decoder-only model scores each token after the first",
                    "give at least two tokens");
      model.decoder.check_length(static_cast<Index>(targets[i].size() - skipped));
    } catch (const Error& e) {
      results[i].error = e.what();
      continue;
    }
    if (!decoder_only) valid_sources.push_back(sources[i]);
    valid_targets.push_back(&targets[i]);
    origin.push_back(i);
  }
  if (valid_targets.empty()) return results;

  // All targets at once, padded to the longest, causally masked.
  const Index count = static_cast<Index>(valid_targets.size());
  const Index width = longest(valid_targets, [&](const std::vector<int>* t) { return static_cast<Index>(t->size() - skipped); });
  std::vector<int> inputs(static_cast<std::size_t>(count * width), model.tokens.pad);
  std::vector<Index> lengths;
  for (Index b = 0; b < count; ++b) {
    const auto& target = *valid_targets[static_cast<std::size_t>(b)];
    auto at = inputs.begin() + b * width;
    if (!decoder_only) *at++ = model.tokens.decoder_start;
    std::copy(target.begin(), target.end() - 1, at);
    lengths.push_back(static_cast<Index>(target.size() - skipped));
  }
  DecodeWorkspace::Buffers& buffers = workspace.buffers();
  start_decoder(model, valid_sources, count, buffers, count, width);
  Matrix& logits = buffers.logits;
  model.decoder.feed(buffers.state, inputs, width, lengths, logits);

  const DecodingOptions plain;  // no constraints: the model's own distribution
  LogitsProcessor processor(plain, eos_ids(model.tokens), model.decoder.vocab_size());
  for (Index b = 0; b < count; ++b) {
    const auto& target = *valid_targets[static_cast<std::size_t>(b)];
    Score& result = results[origin[static_cast<std::size_t>(b)]];
    try {
      for (std::size_t t = skipped; t < target.size(); ++t) {
        const std::span<float> row = logits.row(b * width + static_cast<Index>(t - skipped));
        processor.process(row, {}, static_cast<Index>(t));
        result.token_logprobs.push_back(row[static_cast<std::size_t>(target[t])]);
        result.logprob += result.token_logprobs.back();
      }
    } catch (const Error& e) {
      result.token_logprobs.clear();
      result.logprob = 0.0;
      result.error = e.what();
    }
  }
  return results;
}

std::vector<float> score_target(const Transformer& model, std::span<const int> source, std::span<const int> target) {
  if (model.decoder_only() && !source.empty())
    throw Error("score", "this model is decoder-only: it scores a sequence on its own, without a source");
  const auto sources = model.decoder_only() ? std::vector<std::vector<int>>{} : batch_of_one(source);
  Score result = std::move(score_batch(model, sources, batch_of_one(target)).front());
  if (!result.ok()) throw Error(result.error);
  return std::move(result.token_logprobs);
}

}  // namespace ordo
