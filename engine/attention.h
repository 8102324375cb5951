// Multi-head attention over a set of sequences: self-attention (bidirectional in the
// encoder; causal with a KV cache in the decoder), cross-attention over each sequence's
// source, rotary positions and a per-head score bias where the model has them.
//
// Shapes: d = heads * dh; K/V are kv_heads * dh wide (kv_heads == heads, or fewer for
// grouped-query attention: query head h reads K/V head h / (heads / kv_heads)).
// Activations are [S*T, d] with the rows of sequence s in block s (engine/batch.h).
// Each head h is the column block [h*dh, (h+1)*dh) of the projections, handed to the
// GEMM as a strided view, so there is no split-heads transpose:
//
//   q = x Wq^T + bq                 [S*T, d]   (rotated by RoPE in self-attention)
//   k, v = kv-source W^T + b        [Tk, kv]   per sequence: its own rows, its cache
//                                              slot, or its source's memory
//   per sequence s, per head h:
//     s_h = q_h k_g^T * scale       [T, Tk]    (+ score bias) (causal mask) -> softmax
//                                              scale: 1/sqrt(dh), or 1 (ScoreScaling)
//     c_h = s_h v_g                 [T, dh]    written into columns of c [S*T, d]
//   out = c Wo^T + bo               [S*T, d]
//
// Key padding: a sequence attends over its own keys only (its length, its cache
// length, its source's length), so padded keys are never in the window at all.
// Causal: query row i at step first_query_step + i sees keys up to that step.
// Every query row sees at least one key, so softmax never divides by zero.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/batch.h"
#include "engine/kv_cache.h"
#include "engine/ops.h"
#include "engine/positions.h"
#include "engine/tensor.h"
#include "ordo/results.hpp"

namespace ordo {

// What the scores q k^T are multiplied by before bias, mask and softmax: 1/sqrt(dh)
// (Vaswani et al.), or nothing at all (T5, which folds the factor into its
// initialisation of the query projection; its checkpoints run only unscaled).
enum class ScoreScaling { InverseSqrtHeadDim, None };

struct AttentionMask {
  bool causal = false;
  // Causal: query row i, at step first_query_step + i, sees keys at steps <= its own.
  Index first_query_step = 0;
};

// One head's attention probabilities for one sequence, as the softmax left them (after
// score bias and mask): row i is the query at step first_query_step + i, column j the
// key at step j (cross-attention: source token j). Rows sum to 1.
struct AttentionProbabilities {
  AttentionKind kind;            // which attention of the stack (ordo/results.hpp, as results are labelled)
  Index layer;                   // 0-based, within the encoder or the decoder stack
  Index sequence;                // the sequence within the call's batch (decoder: live sequence)
  Index head;
  Index first_query_step;        // 0 in the encoder; the decoder step of row 0
  ConstMatrixRef probabilities;  // [Tq, Tk]; valid only during the call
};

// Sees attention probabilities as they are computed, to record or show them (ordo viz
// attention, tests). Off unless a stack's AttentionScratch::observer is set; off, it
// costs one null test per head. observe() may run concurrently on the attention
// threads, for different sequences (never for one sequence twice at once), so an
// implementation that stores must lock (AttentionRecorder does).
class AttentionObserver {
 public:
  virtual ~AttentionObserver() = default;
  virtual void observe(const AttentionProbabilities& probabilities) = 0;
};

// Scratch buffers for attention calls; reserve once, reuse every step.
struct AttentionScratch {
  Matrix queries;  // [S*T, d]
  Matrix keys;     // [S*T, kv]: fresh self-attention K before they join the cache
  Matrix values;   // [S*T, kv]
  Matrix context;  // [S*T, d]
  // [T, Tk]: one sequence and head at a time, one matrix per thread (sequences are
  // shared out among the threads).
  std::vector<Matrix> scores;

  // Optional: shown every head's probabilities. The stack that owns this scratch sets
  // `layer` before each layer's attention, so the observer is told where it is.
  AttentionObserver* observer = nullptr;
  Index layer = 0;

  // Room for `elements` scores in every thread's matrix, so that no step allocates.
  void reserve_scores(Index elements);
};

// Where one scaled_dot_product_attention call sits, for its observer.
struct AttentionSite {
  AttentionObserver* observer = nullptr;  // null: nobody is told
  AttentionKind kind = AttentionKind::Encoder;
  Index layer = 0;
  Index sequence = 0;
};

// The attention core for one sequence, all heads: q [Tq, H*dh], k and v [Tk, Hkv*dh]
// -> context [Tq, H*dh]. `bias` may be null. `scores` is resized to [Tq, Tk] and holds
// the last head's probabilities afterwards; each head's are shown to site.observer,
// if any. Throws Error on inconsistent shapes.
void scaled_dot_product_attention(ConstMatrixRef q, ConstMatrixRef k, ConstMatrixRef v,
                                  Index heads, const AttentionMask& mask, const ScoreBias* bias,
                                  Matrix& scores, MatrixRef context, const AttentionSite& site = {},
                                  ScoreScaling scaling = ScoreScaling::InverseSqrtHeadDim);

struct AttentionWeights {
  Linear q, k, v, out;
};

// Where each sequence's cross-attention keys are: memory slot source_of[s], of which
// the first source_lengths[source_of[s]] rows are real.
struct MemoryIndex {
  std::span<const Index> source_of;       // [S]
  std::span<const Index> source_lengths;  // [sources]
};

class MultiHeadAttention {
 public:
  // `rotary` (RoPE) and `bias` (ALiBi, T5) apply to self-attention only; null for none.
  // The heads are q's width / heads wide, which need not be d_model / heads (T5's
  // d_kv): q, k, v are [heads x head_dim, d] and out [d, heads x head_dim].
  MultiHeadAttention(AttentionWeights weights, Index heads,
                     std::shared_ptr<const RotaryEmbedding> rotary,
                     std::shared_ptr<const ScoreBias> bias = nullptr,
                     ScoreScaling scaling = ScoreScaling::InverseSqrtHeadDim);

  Index heads() const { return heads_; }
  ScoreScaling scaling() const { return scaling_; }
  // The width of q and of the context (heads x head_dim; d_model in most families).
  Index model_dim() const { return weights_.q.out_features(); }
  Index kv_dim() const { return weights_.k.out_features(); }

  // Bidirectional self-attention (the encoder): sequence s of x [S*T, d] attends over
  // its own first rows.length(s) rows.
  void self_attention(ConstMatrixRef x, const BatchRows& rows, AttentionScratch& scratch,
                      MatrixRef out) const;

  // Causal self-attention with a cache (the decoder): the real rows of sequence s are
  // its steps first_step(s) .. +length(s)-1; their K/V are written into cache slot
  // slots[s] at those rows, and each row attends over the slot's rows up to its step.
  void cached_self_attention(ConstMatrixRef x, const BatchRows& rows, KeyValueCache& cache,
                             std::span<const Index> slots, AttentionScratch& scratch,
                             MatrixRef out) const;

  // Writes the K/V projections of memory [sources * L, d] into `memory` (a slot per
  // source, capacity L): once per batch of sources, shared by all their beams.
  void project_memory(ConstMatrixRef memory, KeyValueCache& cache) const;

  // Cross-attention of x [S*T, d] over each sequence's source in a cache filled by
  // project_memory(); never rotated, never biased, never causal.
  void cross_attention(ConstMatrixRef x, const BatchRows& rows, const KeyValueCache& memory,
                       const MemoryIndex& index, AttentionScratch& scratch, MatrixRef out) const;

 private:
  // q [S*T, d] -> Q, and K/V of x into scratch, rotated.
  void project_self(ConstMatrixRef x, const BatchRows& rows, AttentionScratch& scratch) const;

  AttentionWeights weights_;
  Index heads_;
  std::shared_ptr<const RotaryEmbedding> rotary_;
  std::shared_ptr<const ScoreBias> bias_;
  ScoreScaling scaling_;
};

}  // namespace ordo
