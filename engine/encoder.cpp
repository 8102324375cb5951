#include "engine/encoder.h"

namespace ordo {

Encoder::Encoder(Embedding embedding, std::vector<EncoderLayer> layers,
                 std::optional<NormWeights> final_norm, NormPlacement placement)
    : embedding_(std::move(embedding)),
      layers_(std::move(layers)),
      final_norm_(std::move(final_norm)),
      placement_(placement) {}

void Encoder::encode(std::span<const int> ids, const BatchRows& rows, EncoderWorkspace& ws,
                     Matrix& out) const {
  check_batch_rows("encoder", rows, static_cast<Index>(ids.size()));
  out.resize(rows.rows(), dim());
  embedding_.embed(ids, rows, out);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const EncoderLayer& layer = layers_[i];
    ws.attention.layer = static_cast<Index>(i);  // for an observer of the probabilities
    // Self-attention over the whole source.
    ConstMatrixRef in = norm_before(out, layer.self_attention_norm, placement_, ws.residual);
    layer.self_attention.self_attention(in, rows, ws.attention, ws.residual.delta);
    add_and_norm_after(out, layer.self_attention_norm, placement_, ws.residual);
    // Feed-forward, row by row.
    in = norm_before(out, layer.final_norm, placement_, ws.residual);
    layer.feed_forward.forward(in, ws.feed_forward, ws.residual.delta);
    add_and_norm_after(out, layer.final_norm, placement_, ws.residual);
  }
  if (final_norm_) ops::normalize(out, *final_norm_, placement_.eps, out);
}

}  // namespace ordo
