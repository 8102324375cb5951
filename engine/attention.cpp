#include "engine/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "engine/blas.h"
#include "engine/error.h"
#include "engine/thread_pool.h"

namespace ordo {

namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// Query row i sits at step first_query_step + i and may see keys up to that step.
void apply_causal_mask(Index first_query_step, MatrixRef scores) {
  for (Index i = 0; i < scores.rows(); ++i) {
    float* row = scores.data() + i * scores.stride();
    for (Index j = std::max<Index>(first_query_step + i + 1, 0); j < scores.cols(); ++j) row[j] = kMasked;
  }
}

// Runs attend(s, scores) for every sequence s of `rows`, the sequences shared out among
// the threads (each with its own scores matrix): a decode step of a batch has a few
// thousand multiply-adds per sequence and head, which one thread took a tenth of the
// step to do alone while the others waited.
template <class Attend>
void for_each_sequence(const BatchRows& rows, Index keys_per_sequence, Index width, AttentionScratch& scratch,
                       const Attend& attend) {
  const auto parts = static_cast<std::size_t>(threads::count());
  if (scratch.scores.size() < parts) scratch.scores.resize(parts);  // only when the threads change
  const Index work = std::max<Index>(1, rows.rows_per_sequence * keys_per_sequence * width * 2);
  threads::parallel_for(rows.sequences(), work, [&](Index first, Index count, int part) {
    Matrix& scores = scratch.scores[static_cast<std::size_t>(part)];
    for (Index s = first; s < first + count; ++s) attend(s, scores);
  });
}

}  // namespace

void AttentionScratch::reserve_scores(Index elements) {
  scores.resize(std::max<std::size_t>(scores.size(), static_cast<std::size_t>(threads::count())));
  for (Matrix& m : scores) m.reserve(elements);
}

void scaled_dot_product_attention(ConstMatrixRef q, ConstMatrixRef k, ConstMatrixRef v,
                                  Index heads, const AttentionMask& mask, const ScoreBias* bias,
                                  Matrix& scores, MatrixRef context, const AttentionSite& site,
                                  ScoreScaling scaling) {
  const Index d = q.cols();
  const Index head_dim = heads > 0 && d % heads == 0 ? d / heads : 0;
  const Index kv_heads = head_dim > 0 ? k.cols() / head_dim : 0;
  if (head_dim == 0 || kv_heads == 0 || k.cols() % head_dim != 0 || heads % kv_heads != 0 ||
      v.cols() != k.cols() || k.rows() != v.rows() || context.rows() != q.rows() || context.cols() != d)
    throw Error("attention", "inconsistent shapes: q " + shape_of(q) + ", k " + shape_of(k) + ", v " +
                                 shape_of(v) + ", context " + shape_of(context) + ", " +
                                 std::to_string(heads) + " heads",
                "heads must divide q's width, and K/V heads (k width / head_dim) must divide heads");
  if (k.rows() == 0 && q.rows() > 0)
    throw Error("attention", "no keys to attend to for " + std::to_string(q.rows()) + " queries");

  const Index group = heads / kv_heads;  // query heads per K/V head
  const float scale =
      scaling == ScoreScaling::InverseSqrtHeadDim ? 1.0f / std::sqrt(static_cast<float>(head_dim)) : 1.0f;
  scores.resize(q.rows(), k.rows());
  for (Index h = 0; h < heads; ++h) {
    const Index first = h * head_dim;
    const Index kv_first = (h / group) * head_dim;
    // q_h [Tq, dh] x k_g^T [dh, Tk] -> scores [Tq, Tk], times 1/sqrt(dh) (or 1)
    ops::matmul_nt(q.col_block(first, head_dim), k.col_block(kv_first, head_dim), scores, scale);
    if (bias != nullptr) bias->add(scores, h, mask.first_query_step);
    if (mask.causal) apply_causal_mask(mask.first_query_step, scores);
    ops::softmax_rows(scores);
    if (site.observer != nullptr)
      site.observer->observe({site.kind, site.layer, site.sequence, h, mask.first_query_step, scores.view()});
    // scores [Tq, Tk] x v_g [Tk, dh] -> context_h [Tq, dh]
    ops::matmul_nn(scores.view(), v.col_block(kv_first, head_dim), context.col_block(first, head_dim));
  }
}

MultiHeadAttention::MultiHeadAttention(AttentionWeights weights, Index heads,
                                       std::shared_ptr<const RotaryEmbedding> rotary,
                                       std::shared_ptr<const ScoreBias> bias, ScoreScaling scaling)
    : weights_(std::move(weights)),
      heads_(heads),
      rotary_(std::move(rotary)),
      bias_(std::move(bias)),
      scaling_(scaling) {}

void MultiHeadAttention::project_self(ConstMatrixRef x, const BatchRows& rows,
                                      AttentionScratch& scratch) const {
  check_batch_rows("self-attention", rows, x.rows());
  scratch.queries.resize(x.rows(), model_dim());
  scratch.keys.resize(x.rows(), kv_dim());
  scratch.values.resize(x.rows(), kv_dim());
  ops::linear(x, weights_.q, scratch.queries);
  ops::linear(x, weights_.k, scratch.keys);
  ops::linear(x, weights_.v, scratch.values);
  if (rotary_) {
    rotary_->rotate(scratch.queries, rows);
    rotary_->rotate(scratch.keys, rows);
  }
  scratch.context.resize(x.rows(), model_dim());
}

void MultiHeadAttention::self_attention(ConstMatrixRef x, const BatchRows& rows,
                                        AttentionScratch& scratch, MatrixRef out) const {
  project_self(x, rows, scratch);
  for_each_sequence(rows, rows.rows_per_sequence, model_dim(), scratch, [&](Index s, Matrix& scores) {
    // Keys are the sequence's own real rows: its padding is outside the window.
    const Index length = rows.length(s);
    if (length == 0) {  // nothing real in this sequence: no keys, a zero context
      rows.of(scratch.context.view(), s).fill(0.0f);
      return;
    }
    const ConstMatrixRef keys = rows.of(scratch.keys.view(), s).row_block(0, length);
    const ConstMatrixRef values = rows.of(scratch.values.view(), s).row_block(0, length);
    scaled_dot_product_attention(rows.of(scratch.queries.view(), s), keys, values, heads_,
                                 AttentionMask{false, rows.first_step(s)}, bias_.get(), scores,
                                 rows.of(scratch.context.view(), s),
                                 {scratch.observer, AttentionKind::Encoder, scratch.layer, s}, scaling_);
  });
  ops::linear(scratch.context, weights_.out, out);
}

void MultiHeadAttention::cached_self_attention(ConstMatrixRef x, const BatchRows& rows,
                                               KeyValueCache& cache, std::span<const Index> slots,
                                               AttentionScratch& scratch, MatrixRef out) const {
  project_self(x, rows, scratch);
  if (static_cast<Index>(slots.size()) != rows.sequences())
    throw Error("self-attention", std::to_string(slots.size()) + " cache slots for " +
                                      std::to_string(rows.sequences()) + " sequences");
  // The fresh K/V rows join each sequence's history, then every query reads it.
  for (Index s = 0; s < rows.sequences(); ++s) {
    const Index slot = slots[static_cast<std::size_t>(s)];
    const Index first = rows.first_step(s);
    const Index length = rows.length(s);
    if (slot < 0 || slot >= cache.slots() || first + length > cache.capacity())
      throw Error("KV cache", "steps " + std::to_string(first) + ".." + std::to_string(first + length) +
                                  " of slot " + std::to_string(slot) + " do not fit " +
                                  std::to_string(cache.slots()) + " slots x " +
                                  std::to_string(cache.capacity()) + " steps",
                  "a bug in the caller: the decoder state was sized too small");
    const auto fresh_keys = rows.of(scratch.keys.view(), s).row_block(0, length);
    const auto fresh_values = rows.of(scratch.values.view(), s).row_block(0, length);
    for (Index t = 0; t < length; ++t) {
      std::ranges::copy(fresh_keys.row(t), cache.keys(slot, first + t, 1).data());
      std::ranges::copy(fresh_values.row(t), cache.values(slot, first + t, 1).data());
    }
  }
  const Index typical_keys = rows.sequences() > 0 ? rows.first_step(0) + rows.rows_per_sequence : 0;
  for_each_sequence(rows, typical_keys, model_dim(), scratch, [&](Index s, Matrix& scores) {
    // Causal: row t sees the history up to its own step; padding rows see all of it.
    const Index slot = slots[static_cast<std::size_t>(s)];
    const Index first = rows.first_step(s);
    const Index visible = first + rows.length(s);
    const MatrixRef context = rows.of(scratch.context.view(), s);
    if (visible == 0) {  // nothing real in this sequence: no keys, a zero context
      context.fill(0.0f);
      return;
    }
    scaled_dot_product_attention(rows.of(scratch.queries.view(), s), std::as_const(cache).keys(slot, 0, visible),
                                 std::as_const(cache).values(slot, 0, visible), heads_, AttentionMask{true, first},
                                 bias_.get(), scores, context,
                                 {scratch.observer, AttentionKind::Decoder, scratch.layer, s}, scaling_);
  });
  ops::linear(scratch.context, weights_.out, out);
}

void MultiHeadAttention::project_memory(ConstMatrixRef memory, KeyValueCache& cache) const {
  if (memory.rows() != cache.slots() * cache.capacity())
    throw Error("cross-attention", "memory has " + std::to_string(memory.rows()) + " rows for " +
                                       std::to_string(cache.slots()) + " sources x " +
                                       std::to_string(cache.capacity()) + " rows");
  ops::linear(memory, weights_.k, cache.all_keys());
  ops::linear(memory, weights_.v, cache.all_values());
}

void MultiHeadAttention::cross_attention(ConstMatrixRef x, const BatchRows& rows,
                                         const KeyValueCache& memory, const MemoryIndex& index,
                                         AttentionScratch& scratch, MatrixRef out) const {
  check_batch_rows("cross-attention", rows, x.rows());
  if (static_cast<Index>(index.source_of.size()) != rows.sequences())
    throw Error("cross-attention", std::to_string(index.source_of.size()) + " sources named for " +
                                       std::to_string(rows.sequences()) + " sequences");
  scratch.queries.resize(x.rows(), model_dim());
  ops::linear(x, weights_.q, scratch.queries);
  scratch.context.resize(x.rows(), model_dim());
  const Index typical_keys = memory.capacity();
  for_each_sequence(rows, typical_keys, model_dim(), scratch, [&](Index s, Matrix& scores) {
    const Index source = index.source_of[static_cast<std::size_t>(s)];
    const Index length = index.source_lengths[static_cast<std::size_t>(source)];
    // Not causal; the query step only tells an observer which decoder step row 0 is.
    scaled_dot_product_attention(rows.of(scratch.queries.view(), s), memory.keys(source, 0, length),
                                 memory.values(source, 0, length), heads_, AttentionMask{false, rows.first_step(s)},
                                 nullptr, scores, rows.of(scratch.context.view(), s),
                                 {scratch.observer, AttentionKind::Cross, scratch.layer, s}, scaling_);
  });
  ops::linear(scratch.context, weights_.out, out);
}

}  // namespace ordo
