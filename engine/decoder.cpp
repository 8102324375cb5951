#include "engine/decoder.h"

#include <algorithm>
#include <limits>
#include <string>

#include "engine/blas.h"
#include "engine/error.h"
#include "engine/limits.h"
#include "engine/thread_pool.h"

namespace ordo {

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
  check_memory(&memory, source_of);
  if (source_of.empty() || max_sequences < static_cast<Index>(source_of.size()))
    throw Error("decoder", "room for " + std::to_string(max_sequences) + " sequences asked for " +
                               std::to_string(source_of.size()) + " starting ones");
  clear(state, max_sequences, max_steps, memory.rows_per_source);
  admit(state, &memory, source_of, max_steps);
}

void Decoder::start(DecoderState& state, std::span<const Index> source_of, Index max_sequences,
                    Index max_steps) const {
  if (has_cross_attention())
    throw Error("decoder", "needs the encoder output of its sources (this is an encoder-decoder model)",
                "encode the sources first");
  if (source_of.empty() || max_sequences < static_cast<Index>(source_of.size()))
    throw Error("decoder", "room for " + std::to_string(max_sequences) + " sequences asked for " +
                               std::to_string(source_of.size()) + " starting ones");
  clear(state, max_sequences, max_steps);
  admit(state, nullptr, source_of, max_steps);
}

void Decoder::check_memory(const EncodedBatch* memory, std::span<const Index> source_of) const {
  if (has_cross_attention() && memory == nullptr)
    throw Error("decoder", "needs the encoder output of its sources (this is an encoder-decoder model)",
                "encode the sources first");
  if (!has_cross_attention() && memory != nullptr)
    throw Error("decoder", "was given an encoder output, but this model is decoder-only", "start it without memory");
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
}

void Decoder::clear(DecoderState& state, Index max_sequences, Index max_steps, Index rows_per_source) const {
  check_length(max_steps);
  if (max_sequences < 1)
    throw Error("decoder", "room for " + std::to_string(max_sequences) + " sequences", "ask for at least one");
  const auto layers = layers_.size();
  state.self_attention_.resize(layers);
  state.cross_attention_.resize(has_cross_attention() ? layers : 0);
  for (std::size_t i = 0; i < layers; ++i) {
    state.self_attention_[i].reset(max_sequences, max_steps, layers_[i].self_attention.kv_dim());
    if (has_cross_attention())
      state.cross_attention_[i].reset(0, rows_per_source, layers_[i].cross_attention->attention.kv_dim());
  }
  state.memory_lengths_.clear();
  state.slot_of_.clear();
  state.steps_.clear();
  state.source_of_.clear();
  state.capacity_ = 0;
  grow(state, max_sequences, max_steps);
  threads::prepare();
}

void Decoder::grow(DecoderState& state, Index max_sequences, Index max_steps) const {
  if (state.self_attention_.size() != layers_.size()) return clear(state, max_sequences, max_steps);  // never sized
  max_sequences = std::max(max_sequences, state.max_sequences());
  max_steps = std::max(max_steps, state.capacity_);
  for (KeyValueCache& cache : state.self_attention_) cache.grow(max_sequences, max_steps);
  for (auto* v : {&state.slot_of_, &state.steps_, &state.source_of_, &state.next_slot_of_, &state.next_steps_,
                  &state.next_source_of_, &state.free_slots_})
    v->reserve(static_cast<std::size_t>(max_sequences));
  state.ones_.assign(static_cast<std::size_t>(max_sequences), 1);
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
  const Index memory_rows = state.cross_attention_.empty() ? 0 : state.cross_attention_.front().capacity();
  state.attention_.reserve_scores(std::max(max_steps, memory_rows));
  state.capacity_ = max_steps;
}

void Decoder::admit(DecoderState& state, const EncodedBatch* memory, std::span<const Index> source_of,
                    Index max_steps) const {
  check_length(max_steps);
  check_memory(memory, source_of);
  const Index joining = static_cast<Index>(source_of.size());
  const Index live = state.sequences();
  if (live + joining > state.max_sequences() || max_steps > state.capacity_ ||
      state.self_attention_.size() != layers_.size())
    grow(state, live + joining, max_steps);
  if (memory != nullptr) {
    bind_sources(state, *memory, source_of, state.joining_slots_);
  } else {
    state.joining_slots_.assign(source_of.begin(), source_of.end());
  }
  // Newcomers take self-attention slots no live sequence holds.
  std::fill(state.slot_kept_.begin(), state.slot_kept_.end(), std::uint8_t{0});
  for (const Index slot : state.slot_of_) state.slot_kept_[static_cast<std::size_t>(slot)] = 1;
  Index slot = 0;
  for (Index i = 0; i < joining; ++i) {
    while (state.slot_kept_[static_cast<std::size_t>(slot)] != 0) ++slot;
    state.slot_kept_[static_cast<std::size_t>(slot)] = 1;
    state.slot_of_.push_back(slot);
    state.steps_.push_back(0);
    state.source_of_.push_back(state.joining_slots_[static_cast<std::size_t>(i)]);
  }
}

void Decoder::bind_sources(DecoderState& state, const EncodedBatch& memory, std::span<const Index> source_of,
                           std::vector<Index>& slots) const {
  const Index sources = memory.sources();
  if (state.sequences() == 0) {
    // Nothing live: the caches become this batch's, projected in place (one GEMM per
    // layer over the padded encoder output, as a batch decoded alone always had).
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      const MultiHeadAttention& cross = layers_[i].cross_attention->attention;
      state.cross_attention_[i].reset(sources, memory.rows_per_source, cross.kv_dim());
      cross.project_memory(memory.states, state.cross_attention_[i]);
    }
    state.memory_lengths_ = memory.lengths;
    slots.assign(source_of.begin(), source_of.end());
    state.attention_.reserve_scores(std::max(state.capacity_, memory.rows_per_source));
    return;
  }
  // Live sequences read some source slots; the newcomers' sources take the others
  // (grown when too few), projected on their own and copied in.
  std::vector<std::uint8_t> used(static_cast<std::size_t>(state.cross_attention_.front().slots()), 0);
  for (const Index source : state.source_of_) used[static_cast<std::size_t>(source)] = 1;
  std::vector<Index> free;
  for (Index s = 0; s < static_cast<Index>(used.size()); ++s)
    if (used[static_cast<std::size_t>(s)] == 0) free.push_back(s);
  Index total = static_cast<Index>(used.size());
  while (static_cast<Index>(free.size()) < sources) free.push_back(total++);
  state.memory_lengths_.resize(static_cast<std::size_t>(total), 0);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const MultiHeadAttention& cross = layers_[i].cross_attention->attention;
    KeyValueCache& cache = state.cross_attention_[i];
    cache.grow(total, memory.rows_per_source);
    state.joining_.reset(sources, memory.rows_per_source, cross.kv_dim());
    cross.project_memory(memory.states, state.joining_);
    for (Index b = 0; b < sources; ++b)
      cache.copy_slot(state.joining_, b, free[static_cast<std::size_t>(b)], memory.lengths[static_cast<std::size_t>(b)]);
  }
  for (Index b = 0; b < sources; ++b)
    state.memory_lengths_[static_cast<std::size_t>(free[static_cast<std::size_t>(b)])] =
        memory.lengths[static_cast<std::size_t>(b)];
  slots.clear();
  for (const Index source : source_of) slots.push_back(free[static_cast<std::size_t>(source)]);
  state.attention_.reserve_scores(std::max(state.capacity_, state.cross_attention_.front().capacity()));
}

void Decoder::step(DecoderState& state, std::span<const int> tokens, Matrix& logits) const {
  feed(state, tokens, 1, std::span<const Index>(state.ones_).first(state.steps_.size()), logits);
}

void Decoder::feed(DecoderState& state, std::span<const int> tokens, Index rows_per_sequence,
                   std::span<const Index> lengths, Matrix& logits, Logits which, Index first) const {
  if (first < 0 || first + static_cast<Index>(lengths.size()) > state.sequences())
    throw Error("decoder", "feeding sequences " + std::to_string(first) + " .. " +
                               std::to_string(first + static_cast<Index>(lengths.size()) - 1) + " of " +
                               std::to_string(state.sequences()) + " live ones");
  const auto fed = [&](const std::vector<Index>& v) {
    return std::span<const Index>(v).subspan(static_cast<std::size_t>(first), lengths.size());
  };
  const std::span<const Index> steps = fed(state.steps_), slots = fed(state.slot_of_);
  const BatchRows rows{rows_per_sequence, steps, lengths};
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

  const MemoryIndex memory{fed(state.source_of_), state.memory_lengths_};
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const DecoderLayer& layer = layers_[i];
    state.attention_.layer = static_cast<Index>(i);  // for an observer of the probabilities
    ResidualScratch& residual = state.residual_;
    // Self-attention over the sequence so far: its keys and values are cached.
    ConstMatrixRef in = norm_before(x, layer.self_attention_norm, placement_, residual);
    layer.self_attention.cached_self_attention(in, rows, state.self_attention_[i], slots, state.attention_,
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
  for (Index s = 0; s < rows.sequences(); ++s) state.steps_[static_cast<std::size_t>(first + s)] += rows.length(s);
}

}  // namespace ordo
