#include "engine/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <numeric>
#include <optional>

#include "engine/decode_inputs.h"
#include "engine/error.h"
#include "engine/limits.h"
#include "engine/live_batch.h"
#include "engine/memory_budget.h"

namespace ordo {

Index admitted_max_length(const Transformer& model, const DecodeRequest& request, const DecodingOptions& options) {
  check_request(model, request);
  return resolve_max_length(options, model.decoder, static_cast<Index>(request.source.size()),
                            decoder_input_length(model, request));
}

Index check_request_memory(const Transformer& model, std::span<const DecodeRequest> requests,
                           const DecodingOptions& options, std::span<const Index> max_lengths) {
  Index capacity = 0;
  for (std::size_t i = 0; i < requests.size(); ++i)
    capacity = std::max(capacity, decoder_input_length(model, requests[i]) + max_lengths[i] - 1);
  const auto n = [](Index x) { return static_cast<std::uint64_t>(std::max<Index>(x, 0)); };
  const Index count = static_cast<Index>(requests.size());
  const Index slots = count * options.beam_size;
  const Index max_steps = *std::max_element(max_lengths.begin(), max_lengths.end());
  const Index width =
      longest(requests, [](const DecodeRequest& r) { return static_cast<Index>(r.prefix.size()); }) + max_steps;
  const Index source_rows = longest(requests, [](const DecodeRequest& r) { return static_cast<Index>(r.source.size()); });
  const std::uint64_t needed =
      model.decoder.state_bytes(slots, capacity, model.decoder_only() ? 0 : count, source_rows) +
      n(slots) * n(width) * 2 * (sizeof(int) + sizeof(float)) +  // histories
      n(slots) * n(model.decoder.vocab_size()) * sizeof(float);  // logits
  check_memory("decoding", needed,
               std::to_string(count) + (count == 1 ? " input" : " inputs") + " x beam " +
                   std::to_string(options.beam_size) + " x max length " + std::to_string(max_steps),
               "lower --beam or --max-length (or --batch-size; in the library DecodingOptions::beam_size, "
               "max_length)");
  return capacity;
}

std::vector<DecodeResult> decode_requests(const Transformer& model, std::span<const DecodeRequest> requests,
                                          const DecodingOptions& options, std::span<const std::uint64_t> streams,
                                          DecodeWorkspace& workspace, const TokenCallback& on_token,
                                          const InterruptCheck& interrupt) {
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
      max_lengths.push_back(admitted_max_length(model, requests[i], options));
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
  if (on_token) report = [&](std::size_t v, int token, float logprob) { on_token(origin[v], token, logprob); };
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  // The whole batch as one live set: admitted at once (one encoder pass, one prefill),
  // then stepped until every request is done.
  const Index capacity = check_request_memory(model, valid, options, max_lengths);
  DecodeWorkspace::Buffers& buffers = workspace.buffers();
  LiveBatch live(model, buffers);
  live.reserve(static_cast<Index>(valid.size()) * options.beam_size, capacity,
               longest(valid, [](const DecodeRequest& r) { return static_cast<Index>(r.source.size()); }));
  std::vector<std::uint64_t> keys(valid.size());
  std::iota(keys.begin(), keys.end(), std::uint64_t{0});
  if (interrupt) interrupt();  // may throw: the call ends here
  live.admit(valid, max_lengths, keys, std::make_shared<SearchRules>(model, options), valid_streams, report);
  const auto prefilled = Clock::now();
  while (!live.empty()) {
    if (interrupt) interrupt();
    live.step();
  }
  std::vector<DecodeResult> decoded(valid.size());
  for (auto& [key, result] : live.take_finished()) decoded[static_cast<std::size_t>(key)] = std::move(result);
  DecodeTotals run;
  for (const DecodeRequest& r : valid) run.input_tokens += static_cast<Index>(r.source.size() + r.prefix.size());
  run.prefill_seconds = std::chrono::duration<double>(prefilled - started).count();
  run.stepped_tokens = live.stepped_tokens();
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
                                      std::span<const std::uint64_t> streams, DecodeWorkspace& workspace,
                                      const InterruptCheck& interrupt) {
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
    if (interrupt) interrupt();
    std::vector<DecodeResult> decoded = decode_requests(model, chunk, options, chunk_streams, workspace, {}, interrupt);
    for (std::size_t k = 0; k < count; ++k) results[order[first + k]] = std::move(decoded[k]);
  }
  return results;
}

}  // namespace ordo
