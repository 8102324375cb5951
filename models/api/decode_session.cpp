// ordo::DecodeSession: the engine's encoder and decoder driven one call at a time, with
// the checks a public entry owes its caller (sizes, order of calls, memory) before the
// engine's own (ids, steps, parents).
#include "ordo/decode_session.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/limits.h"
#include "engine/memory_budget.h"
#include "models/api/internal.h"

namespace ordo {

struct DecodeSession::State {
  std::shared_ptr<const LoadedModel> model;
  EncoderWorkspace encoder;
  EncodedBatch memory;
  DecoderState decoder;
  Matrix logits;
  bool encoded = false, started = false;
  // The public API's int lists as the engine's Index lists; capacity kept across calls.
  std::vector<Index> first_steps, lengths, indices;

  const Transformer& transformer() const { return model->transformer(); }

  std::span<const Index> as_indices(std::span<const int> values) {
    indices.assign(values.begin(), values.end());
    return indices;
  }

  Logits view() {
    return {logits.data(), static_cast<int>(logits.rows()), static_cast<int>(logits.cols())};
  }

  void require_started(const char* call) const {
    if (!started) throw Error("decode session", std::string(call) + " before start()", "call start() first");
  }

  // Refuses a batch whose caches and buffers do not fit in the memory left, before any
  // of it is allocated (what a search checks for its requests too).
  void check_memory_for(Index max_sequences, Index max_steps) const {
    const Index sources = transformer().decoder_only() ? 0 : memory.sources();
    const std::uint64_t needed =
        transformer().decoder.state_bytes(max_sequences, max_steps, sources, memory.rows_per_source) +
        static_cast<std::uint64_t>(max_sequences) * static_cast<std::uint64_t>(transformer().decoder.vocab_size()) *
            sizeof(float);
    check_memory("a decode session", needed,
                 std::to_string(max_sequences) + " sequences x " + std::to_string(max_steps) + " steps",
                 "start fewer sequences or steps");
  }
};

DecodeSession::DecodeSession(const Model& model) : state_(std::make_unique<State>()) {
  state_->model = detail::ModelAccess::loaded(model);
}
DecodeSession::~DecodeSession() = default;
DecodeSession::DecodeSession(DecodeSession&&) noexcept = default;
DecodeSession& DecodeSession::operator=(DecodeSession&&) noexcept = default;

void DecodeSession::encode(std::span<const int> ids, int sources, int length) {
  State& s = *state_;
  const Transformer& model = s.transformer();
  if (model.decoder_only())
    throw Error("decode session", "encode() on a decoder-only model: it has no encoder", "start() and prefill() instead");
  if (sources < 1 || length < 1 || static_cast<std::size_t>(sources) * static_cast<std::size_t>(length) != ids.size())
    throw Error("decode session", "encode() was given " + std::to_string(ids.size()) + " ids for " +
                                      std::to_string(sources) + " sources of " + std::to_string(length),
                "give sources x length ids, both at least 1");
  if (sources > kMaxBatchSize)
    throw Error("decode session", "encode() was given " + std::to_string(sources) + " sources, more than ordo's " +
                                      std::to_string(kMaxBatchSize), "encode them in batches");
  check_sequence_length("decode session", "a source", length, "encode shorter sources");
  model.encoder->embedding().check_length(length);
  s.started = false;  // a new batch: sequences of the old one would read the wrong memory
  s.encoded = false;  // until this encode has succeeded
  s.first_steps.assign(static_cast<std::size_t>(sources), 0);
  s.lengths.assign(static_cast<std::size_t>(sources), length);
  s.memory.lengths = s.lengths;
  s.memory.rows_per_source = length;
  model.encoder->encode(ids, BatchRows{length, s.first_steps, s.lengths}, s.encoder, s.memory.states);
  s.encoded = true;
}

void DecodeSession::start(std::span<const int> source_of, int max_sequences, int max_steps) {
  State& s = *state_;
  const Transformer& model = s.transformer();
  if (!model.decoder_only() && !s.encoded)
    throw Error("decode session", "start() before encode() on an encoder-decoder model",
                "encode() the sources first");
  if (source_of.empty() || static_cast<std::size_t>(max_sequences) < source_of.size())
    throw Error("decode session", "start() with " + std::to_string(source_of.size()) + " sequences and room for " +
                                      std::to_string(max_sequences),
                "open at least one sequence, and leave room for at least as many as are opened");
  if (max_steps < 1) throw Error("decode session", "start() with max_steps " + std::to_string(max_steps), "allow at least one step");
  if (std::ranges::any_of(source_of, [](int source) { return source < 0; }))
    throw Error("decode session", "start() was given a negative source", "sources count from 0");
  model.decoder.check_length(max_steps);
  s.check_memory_for(max_sequences, max_steps);
  s.started = false;
  if (model.decoder_only())
    model.decoder.start(s.decoder, s.as_indices(source_of), max_sequences, max_steps);
  else
    model.decoder.start(s.decoder, s.memory, s.as_indices(source_of), max_sequences, max_steps);
  s.started = true;
}

Logits DecodeSession::prefill(std::span<const int> ids, int length) {
  State& s = *state_;
  s.require_started("prefill()");
  const Index sequences = s.decoder.sequences();
  if (length < 1 || static_cast<std::size_t>(sequences) * static_cast<std::size_t>(length) != ids.size())
    throw Error("decode session", "prefill() was given " + std::to_string(ids.size()) + " ids for " +
                                      std::to_string(sequences) + " sequences of " + std::to_string(length),
                "give sequences() x length ids, length at least 1");
  s.lengths.assign(static_cast<std::size_t>(sequences), length);
  s.transformer().decoder.feed(s.decoder, ids, length, s.lengths, s.logits, Decoder::Logits::LastRow);
  return s.view();
}

Logits DecodeSession::step(std::span<const int> tokens) {
  State& s = *state_;
  s.require_started("step()");
  if (static_cast<Index>(tokens.size()) != s.decoder.sequences())
    throw Error("decode session", "step() was given " + std::to_string(tokens.size()) + " tokens for " +
                                      std::to_string(s.decoder.sequences()) + " live sequences",
                "give one token per live sequence");
  s.transformer().decoder.step(s.decoder, tokens, s.logits);
  return s.view();
}

void DecodeSession::reorder(std::span<const int> parents) {
  State& s = *state_;
  s.require_started("reorder()");
  s.decoder.reorder(s.as_indices(parents));
}

int DecodeSession::sequences() const noexcept { return state_->started ? static_cast<int>(state_->decoder.sequences()) : 0; }
int DecodeSession::vocabulary_size() const noexcept { return static_cast<int>(state_->transformer().decoder.vocab_size()); }
int DecodeSession::decoder_start_token() const noexcept { return state_->transformer().tokens.decoder_start; }

}  // namespace ordo
