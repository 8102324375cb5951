// The encoder stack: embed, then N x [self-attention, feed-forward], then (pre-norm)
// a final layer norm.  ids [S] -> memory [S, d].
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "engine/attention.h"
#include "engine/embedding.h"
#include "engine/feed_forward.h"
#include "engine/residual.h"

namespace ordo {

struct EncoderLayer {
  MultiHeadAttention self_attention;
  LayerNormWeights self_attention_norm;
  FeedForward feed_forward;
  LayerNormWeights final_norm;
};

// Per-call buffers. Reusing one workspace across calls avoids reallocating.
struct EncoderWorkspace {
  KeyValueCache keys_values;
  AttentionScratch attention;
  ResidualScratch residual;
  Matrix ffn_hidden;
};

class Encoder {
 public:
  Encoder(Embedding embedding, std::vector<EncoderLayer> layers,
          std::optional<LayerNormWeights> final_norm, NormPlacement placement);

  // ids [S] -> out [S, d]. `padding` ([S], nonzero = pad, or empty) is masked as keys;
  // padded rows of the output are computed but meaningless.
  void encode(std::span<const int> ids, std::span<const std::uint8_t> padding,
              EncoderWorkspace& workspace, Matrix& out) const;

  const Embedding& embedding() const { return embedding_; }
  Index layer_count() const { return static_cast<Index>(layers_.size()); }
  Index dim() const { return embedding_.dim(); }

 private:
  Embedding embedding_;
  std::vector<EncoderLayer> layers_;
  std::optional<LayerNormWeights> final_norm_;
  NormPlacement placement_;
};

}  // namespace ordo
