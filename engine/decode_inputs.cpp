#include "engine/decode_inputs.h"

#include <algorithm>
#include <numeric>

#include "engine/error.h"
#include "engine/limits.h"

namespace ordo {

// Checks ids against a vocabulary before they reach an embedding lookup, so the error
// says which input was at fault.
void check_ids(std::span<const int> ids, Index vocab_size, const char* what) {
  if (ids.empty()) throw Error(what, "is empty", "give at least one token id");
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw Error(what, "id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                            " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
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

DecodeWorkspace::DecodeWorkspace() : buffers_(std::make_unique<Buffers>()) {}
DecodeWorkspace::~DecodeWorkspace() = default;
DecodeWorkspace::DecodeWorkspace(DecodeWorkspace&&) noexcept = default;
DecodeWorkspace& DecodeWorkspace::operator=(DecodeWorkspace&&) noexcept = default;

void encode_sources(const Transformer& model, std::span<const std::vector<int>> sources,
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
    encode_sources(model, sources, buffers);
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
  encode_sources(model, sources, workspace.buffers());
  return std::move(workspace.buffers().memory);
}

Matrix encode(const Transformer& model, std::span<const int> source) {
  EncodedBatch out = encode_batch(model, batch_of_one(source));
  return std::move(out.states);
}

}  // namespace ordo
