// The decoder stack, run incrementally.
//
// start() binds a source: it projects the encoder output into every layer's
// cross-attention K/V once. step() then feeds T new target tokens (T = 1 while
// searching; the whole target when scoring with teacher forcing), appends their K/V to
// the self-attention caches and returns their logits. Positions continue from the
// number of tokens already fed, so step-by-step and all-at-once agree.
//
//   tokens [T] -> embed -> N x [causal self-attn, cross-attn, feed-forward]
//             -> (pre-norm: final LN) -> logits [T, V] = h W^T (+ final_logits_bias)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/attention.h"
#include "engine/embedding.h"
#include "engine/feed_forward.h"
#include "engine/residual.h"

namespace ordo {

struct DecoderLayer {
  MultiHeadAttention self_attention;
  LayerNormWeights self_attention_norm;
  MultiHeadAttention cross_attention;
  LayerNormWeights cross_attention_norm;
  FeedForward feed_forward;
  LayerNormWeights final_norm;
};

// Everything one translation needs while decoding: caches and buffers, sized once by
// Decoder::start(). One state per concurrent request; the Decoder itself is immutable.
class DecoderState {
 public:
  Index steps() const { return steps_; }
  Index capacity() const { return capacity_; }

 private:
  friend class Decoder;
  std::vector<KeyValueCache> self_attention_;
  std::vector<KeyValueCache> cross_attention_;
  std::vector<std::uint8_t> memory_padding_;
  Matrix hidden_;
  Matrix ffn_hidden_;
  AttentionScratch attention_;
  ResidualScratch residual_;
  Index steps_ = 0;
  Index capacity_ = 0;
};

class Decoder {
 public:
  Decoder(Embedding embedding, std::vector<DecoderLayer> layers,
          std::optional<LayerNormWeights> final_norm, NormPlacement placement,
          Linear output_projection);

  // Binds the encoder output memory [S, d] (with optional key padding [S]) and makes
  // room for `max_steps` target tokens. Throws if max_steps exceeds max_steps().
  void start(DecoderState& state, ConstMatrixRef memory,
             std::span<const std::uint8_t> memory_padding, Index max_steps) const;

  // Feeds tokens [T] at steps state.steps() .. +T-1; logits is resized to [T, V].
  void step(DecoderState& state, std::span<const int> tokens, Matrix& logits) const;

  Index vocab_size() const { return output_.out_features(); }
  Index dim() const { return embedding_.dim(); }
  Index layer_count() const { return static_cast<Index>(layers_.size()); }
  // Longest target the positions allow.
  Index max_steps() const { return embedding_.max_steps(); }

 private:
  Embedding embedding_;
  std::vector<DecoderLayer> layers_;
  std::optional<LayerNormWeights> final_norm_;
  NormPlacement placement_;
  Linear output_;
};

}  // namespace ordo
