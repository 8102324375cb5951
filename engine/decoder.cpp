#include "engine/decoder.h"

#include <algorithm>
#include <limits>
#include <string>

#include "engine/blas.h"
#include "engine/error.h"
#include "engine/limits.h"
#include "engine/thread_pool.h"

namespace ordo {

namespace {

// Sizes a per-sequence vector, reserving the most it will hold so that later resizes
// within a decode never allocate.
void reset_vector(std::vector<Index>& v, Index size, Index most, Index value = 0) {
  v.reserve(static_cast<std::size_t>(most));
  v.assign(static_cast<std::size_t>(size), value);
}

}  // namespace

void DecoderState::reorder(std::span<const Index> parents) {
  const Index count = static_cast<Index>(parents.size());
  if (count > max_sequences())
    throw Error("decoder state", std::to_string(count) + " sequences after reorder, more than the " +
                                     std::to_string(max_sequences()) + " it was started for");
  for (const Index parent : parents)
    if (parent < 0 || parent >= sequences())
      throw Error("decoder state", "parent " + std::to_string(parent) + " is not one of the " +
                                       std::to_string(sequences()) + " live sequences");
  // The first child of each parent keeps the parent's slot...
  std::fill(slot_kept_.begin(), slot_kept_.end(), std::uint8_t{0});
  next_slot_of_.resize(parents.size());
  next_steps_.resize(parents.size());
  next_source_of_.resize(parents.size());
  for (Index i = 0; i < count; ++i) {
    const auto p = static_cast<std::size_t>(parents[static_cast<std::size_t>(i)]);
    const Index slot = slot_of_[p];
    const bool first_child = slot_kept_[static_cast<std::size_t>(slot)] == 0;
    slot_kept_[static_cast<std::size_t>(slot)] = 1;
    next_slot_of_[static_cast<std::size_t>(i)] = first_child ? slot : -1;
    next_steps_[static_cast<std::size_t>(i)] = steps_[p];
    next_source_of_[static_cast<std::size_t>(i)] = source_of_[p];
  }
  // ...and the others copy the parent's rows into a slot that nobody kept. Copy sources
  // are kept slots, copy targets are not, so no copy reads a slot another one wrote.
  free_slots_.clear();
  for (Index slot = 0; slot < max_sequences(); ++slot)
    if (slot_kept_[static_cast<std::size_t>(slot)] == 0) free_slots_.push_back(slot);
  std::size_t next_free = 0;
  for (Index i = 0; i < count; ++i) {
    Index& slot = next_slot_of_[static_cast<std::size_t>(i)];
    if (slot >= 0) continue;
    const Index parent_slot = slot_of_[static_cast<std::size_t>(parents[static_cast<std::size_t>(i)])];
    slot = free_slots_[next_free++];
    for (KeyValueCache& cache : self_attention_)
      cache.copy_slot(parent_slot, slot, next_steps_[static_cast<std::size_t>(i)]);
  }
  slot_of_.swap(next_slot_of_);
  steps_.swap(next_steps_);
  source_of_.swap(next_source_of_);
}

Decoder::Decoder(Embedding embedding, std::vector<DecoderLayer> layers,
                 std::optional<NormWeights> final_norm, NormPlacement placement,
                 Linear output_projection, float head_scale)
    : embedding_(std::move(embedding)),
      layers_(std::move(layers)),
      final_norm_(std::move(final_norm)),
      placement_(placement),
      output_(std::move(output_projection)),
      head_scale_(head_scale) {
  for (const DecoderLayer& layer : layers_)
    if (layer.cross_attention.has_value() != has_cross_attention())
      throw Error("decoder", "some layers have cross-attention and some do not",
                  "every layer of an encoder-decoder model attends to the encoder");
}

void Decoder::check_length(Index length) const {
  if (length > max_steps())
    throw Error("decoder", "a target of " + std::to_string(length) +
                               " tokens needs more positions than this model's learned table has (max_position_embeddings=" +
                               std::to_string(max_steps()) + ")",
                "shorten the target, or ask for fewer output tokens");
  check_sequence_length("decoder", "a target", length, "ask for fewer output tokens");
}

std::uint64_t Decoder::state_bytes(Index max_sequences, Index max_steps, Index sources, Index rows_per_source) const {
  // In floats, as open() below sizes them; uint64 throughout (each factor < 2^32).
  const auto n = [](Index x) { return static_cast<std::uint64_t>(std::max<Index>(x, 0)); };
  std::uint64_t floats = 0;
  Index widest_query = 0, widest_kv = 0, widest_ffn = 0;
  for (const DecoderLayer& layer : layers_) {
    floats += 2 * n(max_sequences) * n(max_steps) * n(layer.self_attention.kv_dim());  // K and V cache
    if (layer.cross_attention)
      floats += 2 * n(sources) * n(rows_per_source) * n(layer.cross_attention->attention.kv_dim());
    widest_query = std::max(widest_query, layer.self_attention.model_dim());
    widest_kv = std::max(widest_kv, layer.self_attention.kv_dim());
    widest_ffn = std::max(widest_ffn, layer.feed_forward.hidden_dim());
  }
  // hidden, normed, delta; queries, context; keys, values; the FFN's hidden and up.
  floats += n(max_sequences) * (3 * n(dim()) + 2 * n(widest_query) + 2 * n(widest_kv) + 2 * n(widest_ffn));
  return floats * sizeof(float);
}

void Decoder::start(DecoderState& state, const EncodedBatch& memory,
                    std::span<const Index> source_of, Index max_sequences, Index max_steps) const {
  if (!layers_.empty() && !has_cross_attention())
    throw Error("decoder", "was given an encoder output, but this model is decoder-only",
                "start it without memory");
  open(state, &memory, source_of, max_sequences, max_steps);
}

void Decoder::start(DecoderState& state, std::span<const Index> source_of, Index max_sequences,
                    Index max_steps) const {
  if (has_cross_attention())
    throw Error("decoder", "needs the encoder output of its sources (this is an encoder-decoder model)",
                "encode the sources first");
  open(state, nullptr, source_of, max_sequences, max_steps);
}

void Decoder::open(DecoderState& state, const EncodedBatch* memory, std::span<const Index> source_of,
                   Index max_sequences, Index max_steps) const {
  check_length(max_steps);
  const Index sequences = static_cast<Index>(source_of.size());
  if (sequences == 0 || max_sequences < sequences)
    throw Error("decoder", "room for " + std::to_string(max_sequences) + " sequences asked for " +
                               std::to_string(sequences) + " starting ones");
  const Index sources = memory != nullptr ? memory->sources() : std::numeric_limits<Index>::max();
  for (const Index source : source_of)
    if (source < 0 || source >= sources)
      throw Error("decoder", "source " + std::to_string(source) + " is not one of the " +
                                 std::to_string(sources) + " encoded sources");
  if (memory != nullptr &&
      (memory->states.rows() != memory->sources() * memory->rows_per_source || memory->states.cols() != dim()))
    throw Error("decoder", "encoder output [" + std::to_string(memory->states.rows()) + ", " +
                               std::to_string(memory->states.cols()) + "] does not hold " +
                               std::to_string(memory->sources()) + " sources of " +
                               std::to_string(memory->rows_per_source) + " rows x " + std::to_string(dim()));

  const auto layers = layers_.size();
  state.self_attention_.resize(layers);
  state.cross_attention_.resize(memory != nullptr ? layers : 0);
  for (std::size_t i = 0; i < layers; ++i) {
    state.self_attention_[i].reset(max_sequences, max_steps, layers_[i].self_attention.kv_dim());
    if (memory == nullptr) continue;
    const MultiHeadAttention& cross = layers_[i].cross_attention->attention;
    state.cross_attention_[i].reset(memory->sources(), memory->rows_per_source, cross.kv_dim());
    cross.project_memory(memory->states, state.cross_attention_[i]);
  }
  if (memory != nullptr)
    state.memory_lengths_ = memory->lengths;
  else
    state.memory_lengths_.clear();
  state.slot_of_.reserve(static_cast<std::size_t>(max_sequences));
  state.slot_of_.clear();
  for (Index s = 0; s < sequences; ++s) state.slot_of_.push_back(s);
  reset_vector(state.steps_, sequences, max_sequences);
  state.source_of_.reserve(static_cast<std::size_t>(max_sequences));
  state.source_of_.assign(source_of.begin(), source_of.end());
  reset_vector(state.ones_, max_sequences, max_sequences, 1);
  for (auto* v : {&state.next_slot_of_, &state.next_steps_, &state.next_source_of_, &state.free_slots_})
    reset_vector(*v, 0, max_sequences);
  state.slot_kept_.assign(static_cast<std::size_t>(max_sequences), 0);

  // Reserve the largest shapes a step() needs (one row per sequence): the step loop
  // then never allocates. feed() with many rows per sequence may grow them further.
  const Index rows = max_sequences;
  Index widest_query = 0, widest_kv = 0;
  for (const DecoderLayer& layer : layers_) {
    layer.feed_forward.reserve(state.feed_forward_, rows);
    widest_query = std::max(widest_query, layer.self_attention.model_dim());
    widest_kv = std::max(widest_kv, layer.self_attention.kv_dim());
    if (layer.cross_attention) widest_query = std::max(widest_query, layer.cross_attention->attention.model_dim());
  }
  for (Matrix* m : {&state.hidden_, &state.residual_.normed, &state.residual_.delta}) m->reserve(rows * dim());
  for (Matrix* m : {&state.attention_.queries, &state.attention_.context}) m->reserve(rows * widest_query);
  state.attention_.keys.reserve(rows * widest_kv);
  state.attention_.values.reserve(rows * widest_kv);
  state.attention_.reserve_scores(std::max(max_steps, memory != nullptr ? memory->rows_per_source : 0));
  state.capacity_ = max_steps;
  threads::prepare();
}

void Decoder::step(DecoderState& state, std::span<const int> tokens, Matrix& logits) const {
  feed(state, tokens, 1, std::span<const Index>(state.ones_).first(state.steps_.size()), logits);
}

void Decoder::feed(DecoderState& state, std::span<const int> tokens, Index rows_per_sequence,
                   std::span<const Index> lengths, Matrix& logits, Logits which) const {
  const BatchRows rows{rows_per_sequence, state.steps_, lengths};
  check_batch_rows("decoder", rows, static_cast<Index>(tokens.size()));
  for (Index s = 0; s < rows.sequences(); ++s)
    if (rows.first_step(s) + rows.length(s) > state.capacity_)
      throw Error("decoder", "feeding " + std::to_string(rows.length(s)) + " tokens to sequence " +
                                 std::to_string(s) + " after " + std::to_string(rows.first_step(s)) +
                                 " exceeds the " + std::to_string(state.capacity_) +
                                 " steps the state was started with");
  Matrix& x = state.hidden_;
  x.resize(rows.rows(), dim());
  embedding_.embed(tokens, rows, x);

  const MemoryIndex memory{state.source_of_, state.memory_lengths_};
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const DecoderLayer& layer = layers_[i];
    state.attention_.layer = static_cast<Index>(i);  // for an observer of the probabilities
    ResidualScratch& residual = state.residual_;
    // Self-attention over the sequence so far: its keys and values are cached.
    ConstMatrixRef in = norm_before(x, layer.self_attention_norm, placement_, residual);
    layer.self_attention.cached_self_attention(in, rows, state.self_attention_[i], state.slot_of_, state.attention_,
                                               residual.delta);
    add_and_norm_after(x, layer.self_attention_norm, placement_, residual);
    // Cross-attention over the encoded source (encoder-decoder models).
    if (layer.cross_attention) {
      in = norm_before(x, layer.cross_attention->norm, placement_, residual);
      layer.cross_attention->attention.cross_attention(in, rows, state.cross_attention_[i], memory, state.attention_,
                                                       residual.delta);
      add_and_norm_after(x, layer.cross_attention->norm, placement_, residual);
    }
    // Feed-forward, row by row.
    in = norm_before(x, layer.final_norm, placement_, residual);
    layer.feed_forward.forward(in, state.feed_forward_, residual.delta);
    add_and_norm_after(x, layer.final_norm, placement_, residual);
  }
  MatrixRef out = x.view();
  if (which == Logits::LastRow && rows_per_sequence > 1) {
    // Only the last real row of each sequence predicts anything wanted: normalize and
    // project those rows alone (the projection is the widest GEMM of the step).
    state.last_rows_.resize(rows.sequences(), dim());
    for (Index s = 0; s < rows.sequences(); ++s) {
      if (rows.length(s) < 1) throw Error("decoder", "sequence " + std::to_string(s) + " was fed no token");
      const auto last = x.row(s * rows_per_sequence + rows.length(s) - 1);
      std::copy(last.begin(), last.end(), state.last_rows_.row(s).begin());
    }
    out = state.last_rows_.view();
  }
  if (final_norm_) ops::normalize(out, *final_norm_, placement_.eps, out);
  if (head_scale_ != 1.0f) ops::scale(out, head_scale_);  // T5's tied head
  logits.resize(out.rows(), vocab_size());
  ops::linear(out, output_, logits);
  for (Index s = 0; s < rows.sequences(); ++s) state.steps_[static_cast<std::size_t>(s)] += rows.length(s);
}

}  // namespace ordo
