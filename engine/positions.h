// Positional information, in the two places a Transformer can put it.
//
// Additive schemes add a vector per position to the token embeddings before the first
// layer (sinusoidal, learned, or none). Rotary (RoPE) instead rotates q and k inside
// every self-attention, so that <R_m q, R_n k> depends only on m - n. A third kind,
// ScoreBias, adds a bias per head to the attention scores themselves (ALiBi, T5's
// relative buckets, engine/relative_positions.h).
//
// Positions are counted in *steps* from the start of a sequence: step s of a sequence
// has position `offset + s`, where `offset` is the model's position_offset. With a
// KV cache, the decoder's token at step t is encoded at offset + t. In a batch every
// sequence has its own first step (BatchRows), so sequences of different lengths and
// beams of different ages share one call.
#pragma once

#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "engine/batch.h"
#include "engine/rope_scaling.h"
#include "engine/tensor.h"

namespace ordo {

enum class SinusoidalLayout {
  Interleaved,  // pe[2i] = sin, pe[2i+1] = cos (Vaswani et al.)
  Split,        // pe[i] = sin, pe[d/2+i] = cos (tensor2tensor, Marian)
};
enum class SinusoidalFrequencies {
  Vaswani,        // w_i = 10000^(-2i/d)
  Tensor2Tensor,  // w_i = exp(-i ln(10000) / (d/2 - 1))
};
enum class RopeLayout {
  Half,         // rotates pairs (i, i + dh/2): Hugging Face LLaMA's rotate_half
  Interleaved,  // rotates pairs (2i, 2i+1): the RoFormer paper, GPT-J
};

// Adds position vectors to embeddings [S*T, d]: row t of sequence s gets the vector of
// step rows.first_steps[s] + t. Padding rows get the vector of their step too, or
// nothing where a finite table has no row for it (they are never read).
class AdditivePositions {
 public:
  virtual ~AdditivePositions() = default;
  virtual void add(MatrixRef embeddings, const BatchRows& rows) const = 0;
  // The same, given the token id of every row (ids [S*T]): a scheme whose positions
  // depend on the tokens (M2M100's, which skips pad tokens) reads them; the others
  // ignore them.
  virtual void add(MatrixRef embeddings, const BatchRows& rows, std::span<const int> ids) const {
    (void)ids;
    add(embeddings, rows);
  }
  // One sequence: embeddings [T, d] are steps first_step .. first_step+T-1.
  void add(MatrixRef embeddings, Index first_step) const;
  // How many steps a sequence may have; unlimited unless the scheme is a finite table.
  virtual Index max_steps() const { return std::numeric_limits<Index>::max(); }
  // Throws Error, saying what to do, when steps first_step .. first_step+count-1 are
  // past max_steps().
  void check_steps(Index first_step, Index count) const;
};

// The order-blind ablation: adds nothing.
class NoPositions final : public AdditivePositions {
 public:
  void add(MatrixRef, const BatchRows&) const override {}
};

class SinusoidalPositions final : public AdditivePositions {
 public:
  // dim must be even (and >= 4 for Tensor2Tensor frequencies); throws Error otherwise.
  // `max_steps` bounds a sequence as a table of that many rows would (Marian computes
  // its sinusoids into one): a longer one is an error, as for learned positions.
  // With `skip_token` (M2M100's pad, fairseq's make_positions), positions count only
  // the other tokens of a call's rows: the k-th non-skipped real row of sequence s
  // (k from 0) is at offset + first_steps[s] + k, and a skipped row gets no vector (the
  // zero row of M2M100's table). Without ids (the overload below), every row counts.
  SinusoidalPositions(Index dim, SinusoidalLayout layout, SinusoidalFrequencies frequencies,
                      Index offset, Index max_steps = std::numeric_limits<Index>::max(),
                      std::optional<int> skip_token = std::nullopt);
  void add(MatrixRef embeddings, const BatchRows& rows) const override;
  void add(MatrixRef embeddings, const BatchRows& rows, std::span<const int> ids) const override;
  using AdditivePositions::add;
  Index max_steps() const override { return max_steps_; }
  // The position vector of absolute position `position` (any position >= 0), written
  // into out [dim]. Computed in double, rounded once.
  void encode(Index position, std::span<float> out) const;

 private:
  Index dim_;
  SinusoidalLayout layout_;
  Index offset_;
  Index max_steps_;
  std::optional<int> skip_token_;
  std::vector<double> frequencies_;  // [dim/2]
};

class LearnedPositions final : public AdditivePositions {
 public:
  // table [max_positions + offset, d]; step s uses row offset + s.
  LearnedPositions(TensorView table, Index offset);
  // Throws Error when a sequence's real rows need a row past the table ("... longer
  // than max_position_embeddings=N"), never wraps or reads out of bounds.
  void add(MatrixRef embeddings, const BatchRows& rows) const override;
  using AdditivePositions::add;
  Index max_steps() const override { return table_.dim(0) - offset_; }

 private:
  TensorView table_;
  Index offset_;
};

class RotaryEmbedding {
 public:
  // head_dim must be even; theta > 0; a scaling's factor finite and > 0, and dynamic
  // scaling needs max_position_embeddings > 0 (engine/rope_scaling.h). Throws Error
  // otherwise.
  RotaryEmbedding(Index head_dim, double theta, RopeLayout layout, Index offset,
                  const RopeScaling& scaling = {}, Index max_position_embeddings = 0);
  // Rotates each head of x [S*T, heads*head_dim] (a q or k projection) in place; row t
  // of sequence s is at step rows.first_steps[s] + t. With dynamic scaling, sequence s
  // is taken to be as long as its last real row's position + 1 (engine/rope_scaling.h
  // says why); the other scalings are fixed frequencies. YaRN's attention factor
  // multiplies the rotated vectors.
  void rotate(MatrixRef x, const BatchRows& rows) const;
  // One sequence: rows of x [T, w] are steps first_step .. first_step+T-1.
  void rotate(MatrixRef x, Index first_step) const;

  // The frequencies and attention factor a sequence of `sequence_length` positions is
  // rotated with (what rotate uses; pictures draw them).
  RopeFrequencies frequencies(Index sequence_length) const;

 private:
  Index head_dim_;
  double theta_;
  RopeLayout layout_;
  Index offset_;
  RopeScaling scaling_;
  Index max_position_embeddings_;
  // For sequences up to max_position_embeddings (every length but dynamic's longer ones).
  RopeFrequencies fixed_;
};

// A bias added to one head's attention scores before the softmax, from the positions of
// query and key: ALiBi (-m_h |i - j|) and T5 relative buckets (engine/relative_positions.h).
// Attention calls it per sequence and head, after scaling by 1/sqrt(dh) and before
// masking, so an implementation sees exactly the scores it biases.
class ScoreBias {
 public:
  virtual ~ScoreBias() = default;
  // scores [Tq, Tk] of head `head` for one sequence: query row i is at step
  // first_query_step + i, key column j at step j.
  virtual void add(MatrixRef scores, Index head, Index first_query_step) const = 0;
};

}  // namespace ordo
