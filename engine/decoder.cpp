#include "engine/decoder.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/transformer.h"

namespace ordo {

Decoder::Decoder(Embedding embedding, std::vector<DecoderLayer> layers,
                 std::optional<LayerNormWeights> final_norm, NormPlacement placement,
                 Linear output_projection)
    : embedding_(std::move(embedding)),
      layers_(std::move(layers)),
      final_norm_(std::move(final_norm)),
      placement_(placement),
      output_(std::move(output_projection)) {}

void Decoder::start(DecoderState& state, ConstMatrixRef memory,
                    std::span<const std::uint8_t> memory_padding, Index max_steps) const {
  if (max_steps > this->max_steps())
    throw Error("decoder", "a target of " + std::to_string(max_steps) +
                               " tokens needs more positions than this model's learned table has (max_position_embeddings=" +
                               std::to_string(this->max_steps()) + ")",
                "shorten the target, or ask for fewer output tokens");
  if (max_steps > kMaxSequenceLength)
    throw Error("decoder", "a target of " + std::to_string(max_steps) + " tokens is more than ordo's limit of " +
                               std::to_string(kMaxSequenceLength),
                "ask for fewer output tokens");
  if (!memory_padding.empty() && static_cast<Index>(memory_padding.size()) != memory.rows())
    throw Error("decoder", "memory padding has " + std::to_string(memory_padding.size()) +
                               " entries for " + std::to_string(memory.rows()) + " source rows");
  const auto layers = layers_.size();
  state.self_attention_.resize(layers);
  state.cross_attention_.resize(layers);
  for (std::size_t i = 0; i < layers; ++i) {
    state.self_attention_[i].reset(max_steps, dim());
    state.cross_attention_[i].reset(memory.rows(), dim());
    layers_[i].cross_attention.project_memory(memory, state.cross_attention_[i]);
  }
  state.memory_padding_.assign(memory_padding.begin(), memory_padding.end());
  // Reserve the largest shapes now: the step loop then never allocates.
  state.hidden_.reserve(max_steps * dim());
  state.residual_.normed.reserve(max_steps * dim());
  state.residual_.delta.reserve(max_steps * dim());
  state.attention_.queries.reserve(max_steps * dim());
  state.attention_.context.reserve(max_steps * dim());
  // One query row per step while searching; feeding many tokens at once (scoring) may
  // grow the scores further, outside the search loop.
  state.attention_.scores.reserve(std::max(max_steps, memory.rows()));
  Index widest_ffn = 0;
  for (const DecoderLayer& layer : layers_)
    widest_ffn = std::max(widest_ffn, layer.feed_forward.hidden_dim());
  state.ffn_hidden_.reserve(max_steps * widest_ffn);
  state.steps_ = 0;
  state.capacity_ = max_steps;
}

void Decoder::step(DecoderState& state, std::span<const int> tokens, Matrix& logits) const {
  const Index count = static_cast<Index>(tokens.size());
  if (state.steps_ + count > state.capacity_)
    throw Error("decoder", "feeding " + std::to_string(count) + " tokens after " +
                               std::to_string(state.steps_) + " exceeds the " +
                               std::to_string(state.capacity_) + " steps the state was started with");
  Matrix& x = state.hidden_;
  x.resize(count, dim());
  embedding_.embed(tokens, state.steps_, x);

  AttentionMask causal;
  causal.causal = true;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const DecoderLayer& layer = layers_[i];
    residual_block(x, layer.self_attention_norm, placement_, state.residual_,
                   [&](ConstMatrixRef in, MatrixRef delta) {
                     layer.self_attention.self_attention(in, state.self_attention_[i], causal,
                                                         state.attention_, delta);
                   });
    residual_block(x, layer.cross_attention_norm, placement_, state.residual_,
                   [&](ConstMatrixRef in, MatrixRef delta) {
                     layer.cross_attention.cross_attention(in, state.cross_attention_[i],
                                                           state.memory_padding_,
                                                           state.attention_, delta);
                   });
    residual_block(x, layer.final_norm, placement_, state.residual_,
                   [&](ConstMatrixRef in, MatrixRef delta) {
                     layer.feed_forward.forward(in, state.ffn_hidden_, delta);
                   });
  }
  if (final_norm_) ops::layer_norm(x, *final_norm_, placement_.eps, x);
  logits.resize(count, vocab_size());
  ops::linear(x, output_, logits);
  state.steps_ += count;
}

}  // namespace ordo
