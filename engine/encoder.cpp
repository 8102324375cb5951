#include "engine/encoder.h"

#include "engine/error.h"
#include "engine/transformer.h"

namespace ordo {

Encoder::Encoder(Embedding embedding, std::vector<EncoderLayer> layers,
                 std::optional<LayerNormWeights> final_norm, NormPlacement placement)
    : embedding_(std::move(embedding)),
      layers_(std::move(layers)),
      final_norm_(std::move(final_norm)),
      placement_(placement) {}

void Encoder::encode(std::span<const int> ids, std::span<const std::uint8_t> padding,
                     EncoderWorkspace& ws, Matrix& out) const {
  const Index length = static_cast<Index>(ids.size());
  if (length == 0) throw Error("encoder", "the source is empty", "give at least one token");
  if (length > kMaxSequenceLength)
    throw Error("encoder", "the source has " + std::to_string(length) + " tokens, more than ordo's limit of " +
                               std::to_string(kMaxSequenceLength),
                "split the input into sentences");
  out.resize(length, dim());
  embedding_.embed(ids, 0, out);
  ws.keys_values.reset(length, dim());
  AttentionMask mask;
  mask.key_padding = padding;
  for (const EncoderLayer& layer : layers_) {
    residual_block(out, layer.self_attention_norm, placement_, ws.residual,
                   [&](ConstMatrixRef in, MatrixRef delta) {
                     ws.keys_values.clear();  // every layer attends over its own K/V
                     layer.self_attention.self_attention(in, ws.keys_values, mask, ws.attention,
                                                         delta);
                   });
    residual_block(out, layer.final_norm, placement_, ws.residual,
                   [&](ConstMatrixRef in, MatrixRef delta) {
                     layer.feed_forward.forward(in, ws.ffn_hidden, delta);
                   });
  }
  if (final_norm_) ops::layer_norm(out, *final_norm_, placement_.eps, out);
}

}  // namespace ordo
