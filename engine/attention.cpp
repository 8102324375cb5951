#include "engine/attention.h"

#include <cmath>
#include <limits>

#include "engine/blas.h"
#include "engine/error.h"

namespace ordo {

namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

void apply_mask(const AttentionMask& mask, MatrixRef scores) {
  const bool padded = !mask.key_padding.empty();
  for (Index i = 0; i < scores.rows(); ++i) {
    std::span<float> row = scores.row(i);
    if (padded) {
      for (Index j = 0; j < scores.cols(); ++j)
        if (mask.key_padding[static_cast<std::size_t>(j)]) row[static_cast<std::size_t>(j)] = kMasked;
    }
    if (mask.causal) {
      // Query i sits at step first_query_step + i and may see keys up to that step.
      for (Index j = mask.first_query_step + i + 1; j < scores.cols(); ++j)
        row[static_cast<std::size_t>(j)] = kMasked;
    }
  }
}

}  // namespace

void scaled_dot_product_attention(ConstMatrixRef q, ConstMatrixRef k, ConstMatrixRef v,
                                  Index heads, const AttentionMask& mask, Matrix& scores,
                                  MatrixRef context) {
  const Index d = q.cols();
  if (heads <= 0 || d % heads != 0 || k.cols() != d || v.cols() != d || k.rows() != v.rows() ||
      context.rows() != q.rows() || context.cols() != d)
    throw Error("attention", "inconsistent shapes: q [" + std::to_string(q.rows()) + ", " +
                                 std::to_string(d) + "], k [" + std::to_string(k.rows()) +
                                 ", " + std::to_string(k.cols()) + "], v [" +
                                 std::to_string(v.rows()) + ", " + std::to_string(v.cols()) +
                                 "], " + std::to_string(heads) + " heads");
  if (!mask.key_padding.empty() && static_cast<Index>(mask.key_padding.size()) != k.rows())
    throw Error("attention", "key padding mask has " + std::to_string(mask.key_padding.size()) +
                                 " entries for " + std::to_string(k.rows()) + " keys");

  const Index head_dim = d / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  scores.resize(q.rows(), k.rows());
  for (Index h = 0; h < heads; ++h) {
    const Index first = h * head_dim;
    // q_h [Tq, dh] x k_h^T [dh, Tk] -> scores [Tq, Tk], times 1/sqrt(dh)
    blas::gemm_nt(q.col_block(first, head_dim), k.col_block(first, head_dim), scores, scale);
    apply_mask(mask, scores);
    ops::softmax_rows(scores);
    // scores [Tq, Tk] x v_h [Tk, dh] -> context_h [Tq, dh]
    blas::gemm_nn(scores.view(), v.col_block(first, head_dim), context.col_block(first, head_dim));
  }
}

MultiHeadAttention::MultiHeadAttention(AttentionWeights weights, Index heads,
                                       std::shared_ptr<const RotaryEmbedding> rotary)
    : weights_(std::move(weights)), heads_(heads), rotary_(std::move(rotary)) {}

void MultiHeadAttention::self_attention(ConstMatrixRef x, KeyValueCache& cache, AttentionMask mask,
                                        AttentionScratch& scratch, MatrixRef out) const {
  const Index first_step = cache.length();
  const KeyValueCache::Rows fresh = cache.append(x.rows());
  ops::linear(x, weights_.k, fresh.keys);
  ops::linear(x, weights_.v, fresh.values);
  scratch.queries.resize(x.rows(), model_dim());
  ops::linear(x, weights_.q, scratch.queries);
  if (rotary_) {
    rotary_->rotate(scratch.queries, first_step);
    rotary_->rotate(fresh.keys, first_step);
  }
  mask.first_query_step = first_step;
  attend(cache.keys(), cache.values(), mask, scratch, out);
}

void MultiHeadAttention::project_memory(ConstMatrixRef memory, KeyValueCache& cache) const {
  cache.clear();
  const KeyValueCache::Rows rows = cache.append(memory.rows());
  ops::linear(memory, weights_.k, rows.keys);
  ops::linear(memory, weights_.v, rows.values);
}

void MultiHeadAttention::cross_attention(ConstMatrixRef x, const KeyValueCache& memory,
                                         std::span<const std::uint8_t> memory_padding,
                                         AttentionScratch& scratch, MatrixRef out) const {
  scratch.queries.resize(x.rows(), model_dim());
  ops::linear(x, weights_.q, scratch.queries);
  AttentionMask mask;
  mask.key_padding = memory_padding;
  attend(memory.keys(), memory.values(), mask, scratch, out);
}

void MultiHeadAttention::attend(ConstMatrixRef keys, ConstMatrixRef values,
                                const AttentionMask& mask, AttentionScratch& scratch,
                                MatrixRef out) const {
  scratch.context.resize(scratch.queries.rows(), model_dim());
  scaled_dot_product_attention(scratch.queries, keys, values, heads_, mask, scratch.scores,
                               scratch.context);
  ops::linear(scratch.context, weights_.out, out);
}

}  // namespace ordo
