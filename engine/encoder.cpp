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
    residual_block(out, layer.self_attention_norm, placement_, ws.residual,
                   [&](ConstMatrixRef in, MatrixRef delta) {
                     layer.self_attention.self_attention(in, rows, ws.attention, delta);
                   });
    residual_block(out, layer.final_norm, placement_, ws.residual,
                   [&](ConstMatrixRef in, MatrixRef delta) {
                     layer.feed_forward.forward(in, ws.feed_forward, delta);
                   });
  }
  if (final_norm_) ops::normalize(out, *final_norm_, placement_.eps, out);
}

}  // namespace ordo
