// The encoder stack: embed, then N x [self-attention, feed-forward], then (pre-norm)
// a final layer norm. A batch of sources, padded to one length:
//   ids [B*L] -> out [B*L, d]; rows of source b past its length are padding.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "engine/attention.h"
#include "engine/batch.h"
#include "engine/embedding.h"
#include "engine/feed_forward.h"
#include "engine/residual.h"

namespace ordo {

// A batch of sources, encoded: what the decoder attends to. (ordo::EncoderOutput is
// one source's output as the public API returns it.)
struct EncodedBatch {
  Matrix states;               // [B*L, d]; rows of source b past lengths[b] are padding
  std::vector<Index> lengths;  // [B] tokens of each source
  Index rows_per_source = 0;   // L, the longest source

  Index sources() const { return static_cast<Index>(lengths.size()); }
  // The real rows of source b, [lengths[b], d].
  ConstMatrixRef source(Index b) const {
    return states.view().row_block(b * rows_per_source, lengths[static_cast<std::size_t>(b)]);
  }
};

struct EncoderLayer {
  MultiHeadAttention self_attention;
  NormWeights self_attention_norm;
  FeedForward feed_forward;
  NormWeights final_norm;
};

// Per-call buffers. Reusing one workspace across calls avoids reallocating.
struct EncoderWorkspace {
  AttentionScratch attention;
  ResidualScratch residual;
  FeedForwardScratch feed_forward;
};

class Encoder {
 public:
  Encoder(Embedding embedding, std::vector<EncoderLayer> layers,
          std::optional<NormWeights> final_norm, NormPlacement placement);

  // ids [B*L], laid out as `rows` says (first steps 0) -> out [B*L, d]. Each source
  // attends over its own rows.length(b) tokens only; its padding rows are computed but
  // meaningless. Ids are checked by the embedding; lengths by the caller (encode_batch).
  void encode(std::span<const int> ids, const BatchRows& rows, EncoderWorkspace& workspace,
              Matrix& out) const;

  const Embedding& embedding() const { return embedding_; }
  Index layer_count() const { return static_cast<Index>(layers_.size()); }
  Index dim() const { return embedding_.dim(); }

 private:
  Embedding embedding_;
  std::vector<EncoderLayer> layers_;
  std::optional<NormWeights> final_norm_;
  NormPlacement placement_;
};

}  // namespace ordo
