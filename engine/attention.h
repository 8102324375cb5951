// Multi-head attention: self (optionally causal, optionally rotary) and cross.
//
// Shapes: d = heads * head_dim. Inputs and outputs are [T, d] row-major. Each head h is
// the column block [h*dh, (h+1)*dh) of the projections, handed to BLAS as a strided
// view, so there is no split-heads transpose:
//
//   q = x Wq^T + bq            [Tq, d]     (rotated by RoPE in self-attention)
//   k, v = kv-source W^T + b   [Tk, d]     (appended to / read from a KeyValueCache)
//   for each head h:
//     s_h = q_h k_h^T / sqrt(dh)   [Tq, Tk]  masked (causal, key padding) -> softmax
//     c_h = s_h v_h                [Tq, dh]  written into columns of c [Tq, d]
//   out = c Wo^T + bo          [Tq, d]
//
// Masking: a masked score is -inf before softmax; a query whose keys are all masked
// gets a zero context vector (never NaN).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "engine/kv_cache.h"
#include "engine/ops.h"
#include "engine/positions.h"
#include "engine/tensor.h"

namespace ordo {

struct AttentionMask {
  // Causal: query row i, at step first_query_step + i, sees keys at steps <= its own.
  bool causal = false;
  Index first_query_step = 0;
  // [Tk]; nonzero marks a padding key that no query may attend to. Empty: no padding.
  std::span<const std::uint8_t> key_padding;
};

// Scratch buffers for one attention call; reserve once, reuse every step.
struct AttentionScratch {
  Matrix queries;  // [Tq, d]
  Matrix context;  // [Tq, d]
  Matrix scores;   // [Tq, Tk]
};

// The attention core, all heads: q [Tq, d], k and v [Tk, d] -> context [Tq, d].
// `scores` is resized to [Tq, Tk]; it holds the last head's probabilities afterwards.
void scaled_dot_product_attention(ConstMatrixRef q, ConstMatrixRef k, ConstMatrixRef v,
                                  Index heads, const AttentionMask& mask, Matrix& scores,
                                  MatrixRef context);

struct AttentionWeights {
  Linear q, k, v, out;
};

class MultiHeadAttention {
 public:
  // `rotary` is applied to q and k of self-attention only; null for no RoPE.
  MultiHeadAttention(AttentionWeights weights, Index heads,
                     std::shared_ptr<const RotaryEmbedding> rotary);

  Index heads() const { return heads_; }
  Index model_dim() const { return weights_.q.out_features(); }

  // Self-attention of x [T, d], whose rows are the steps cache.length() .. +T-1: their
  // K/V are appended to `cache`, and every row attends over the whole cache (causally
  // if mask.causal; mask.first_query_step is set from the cache).
  void self_attention(ConstMatrixRef x, KeyValueCache& cache, AttentionMask mask,
                      AttentionScratch& scratch, MatrixRef out) const;

  // Fills `cache` with the K/V projections of memory [S, d] (cross-attention, once per
  // source). The cache must have capacity >= S.
  void project_memory(ConstMatrixRef memory, KeyValueCache& cache) const;

  // Cross-attention of x [T, d] over a cache filled by project_memory(); never rotated.
  void cross_attention(ConstMatrixRef x, const KeyValueCache& memory,
                       std::span<const std::uint8_t> memory_padding,
                       AttentionScratch& scratch, MatrixRef out) const;

 private:
  void attend(ConstMatrixRef keys, ConstMatrixRef values, const AttentionMask& mask,
              AttentionScratch& scratch, MatrixRef out) const;

  AttentionWeights weights_;
  Index heads_;
  std::shared_ptr<const RotaryEmbedding> rotary_;
};

}  // namespace ordo
