#include "models/build_transformer.h"

#include <cmath>
#include <limits>
#include <memory>

#include "engine/error.h"
#include "engine/relative_positions.h"
#include "models/tensor_names.h"

namespace ordo {

namespace {

// Binds roles to weights: every tensor comes through tensor_name(), so the family's
// table is the only place a name is spelled.
class Binder {
 public:
  Binder(const ModelConfig& config, const WeightStore& weights) : config_(config), weights_(weights) {}

  // The role's tensor; empty when this config has none (an optional bias, say).
  TensorView tensor(Stack stack, Role role, Part part = Part::Weight, Index layer = 0) const {
    const auto name = tensor_name(config_, stack, role, part, layer);
    return name ? weights_.get(*name) : TensorView();
  }
  TensorView required(Stack stack, Role role, Index layer = 0) const {
    const auto name = tensor_name(config_, stack, role, Part::Weight, layer);
    if (!name) throw Error("weights", "this config has no tensor for a role ordo needs", "a bug in ordo's family tables");
    return weights_.get(*name);
  }
  // A weight matrix (a linear's, the embedding, the head) in the format it runs in.
  WeightMatrix matrix(Stack stack, Role role, Index layer = 0) const {
    const auto name = tensor_name(config_, stack, role, Part::Weight, layer);
    if (!name) throw Error("weights", "this config has no tensor for a role ordo needs", "a bug in ordo's family tables");
    return weights_.matrix(*name);
  }
  Linear linear(Stack stack, Role role, Index layer) const {
    return {matrix(stack, role, layer), tensor(stack, role, Part::Bias, layer)};
  }
  NormWeights norm(Stack stack, Role role, Index layer = 0) const {
    return {required(stack, role, layer), tensor(stack, role, Part::Bias, layer), config_.norm_kind};
  }
  std::optional<NormWeights> optional_norm(Stack stack, Role role) const {
    if (!tensor_name(config_, stack, role, Part::Weight)) return std::nullopt;
    return norm(stack, role);
  }

  Embedding embedding(Stack stack) const {
    const float scale =
        config_.scale_embedding ? static_cast<float>(std::sqrt(static_cast<double>(config_.d_model))) : 1.0f;
    return Embedding(matrix(stack, Role::TokenEmbedding), scale, positions(stack),
                     optional_norm(stack, Role::EmbeddingNorm), static_cast<float>(config_.layer_norm_eps));
  }

  std::shared_ptr<const AdditivePositions> positions(Stack stack) const {
    switch (config_.position_encoding) {
      case PositionEncoding::Sinusoidal: {
        // A family whose file may hold the sinusoid table (Marian) runs on the table the
        // file holds, as transformers does (it loads it into the embedding); else the
        // sinusoids are computed.
        if (const TensorView table = tensor(stack, Role::Positions); !table.empty())
          return std::make_shared<LearnedPositions>(table, config_.position_offset);
        const Index bound = config_.positions_bounded ? config_.max_position_embeddings
                                                      : std::numeric_limits<Index>::max();
        return std::make_shared<SinusoidalPositions>(config_.d_model, config_.sinusoidal_layout,
                                                     config_.sinusoidal_frequencies, config_.position_offset, bound);
      }
      case PositionEncoding::Learned:
        return std::make_shared<LearnedPositions>(required(stack, Role::Positions), config_.position_offset);
      case PositionEncoding::Rope:  // in attention: q and k rotated, or scores biased
      case PositionEncoding::Alibi:
      case PositionEncoding::T5Relative:
      case PositionEncoding::None:
        return std::make_shared<NoPositions>();
    }
    return nullptr;
  }

  std::shared_ptr<const RotaryEmbedding> rotary(Index head_dim) const {
    if (config_.position_encoding != PositionEncoding::Rope) return nullptr;
    return std::make_shared<RotaryEmbedding>(head_dim, config_.rope_theta, config_.rope_layout,
                                             config_.position_offset, config_.rope_scaling,
                                             config_.max_position_embeddings);
  }

  // The stack's self-attention score bias, one instance shared by all its layers (T5
  // shares the table the same way); the encoder looks both ways, the decoder back.
  std::shared_ptr<const ScoreBias> score_bias(Stack stack, Index heads) const {
    const Direction direction = stack == Stack::Encoder ? Direction::Bidirectional : Direction::Causal;
    switch (config_.position_encoding) {
      case PositionEncoding::Alibi:
        return std::make_shared<AlibiBias>(heads, direction);
      case PositionEncoding::T5Relative:
        return std::make_shared<T5RelativeBias>(required(stack, Role::RelativeBias), direction,
                                                config_.relative_attention_max_distance);
      case PositionEncoding::Sinusoidal:  // no default: a new scheme must say where it goes
      case PositionEncoding::Learned:
      case PositionEncoding::Rope:
      case PositionEncoding::None:
        return nullptr;
    }
    return nullptr;
  }

  struct SelfAttentionPositions {
    std::shared_ptr<const RotaryEmbedding> rotary;
    std::shared_ptr<const ScoreBias> bias;
  };
  SelfAttentionPositions self_attention_positions(Stack stack, Index heads, Index head_dim) const {
    return {rotary(head_dim), score_bias(stack, heads)};
  }

  MultiHeadAttention self_attention(Stack stack, Index layer, Index heads,
                                    const SelfAttentionPositions& positions) const {
    return MultiHeadAttention({linear(stack, Role::SelfQuery, layer), linear(stack, Role::SelfKey, layer),
                               linear(stack, Role::SelfValue, layer), linear(stack, Role::SelfOutput, layer)},
                              heads, positions.rotary, positions.bias);
  }

  // Cross-attention is never rotated: source and target positions are unrelated.
  CrossAttentionBlock cross_attention(Index layer) const {
    const Stack d = Stack::Decoder;
    return {MultiHeadAttention({linear(d, Role::CrossQuery, layer), linear(d, Role::CrossKey, layer),
                                linear(d, Role::CrossValue, layer), linear(d, Role::CrossOutput, layer)},
                               config_.decoder_attention_heads, nullptr),
            norm(d, Role::CrossNorm, layer)};
  }

  FeedForward feed_forward(Stack stack, Index layer) const {
    switch (config_.feed_forward_kind) {
      case FeedForwardKind::Plain:
        return FeedForward::plain(linear(stack, Role::FeedForwardIn, layer), linear(stack, Role::FeedForwardOut, layer),
                                  config_.activation_function);
      case FeedForwardKind::Gated:
        return FeedForward::gated(linear(stack, Role::FeedForwardIn, layer), linear(stack, Role::FeedForwardUp, layer),
                                  linear(stack, Role::FeedForwardOut, layer), config_.activation_function);
    }
    throw Error("weights", "unknown feed-forward kind");
  }

  NormPlacement placement() const { return {config_.normalize_before, static_cast<float>(config_.layer_norm_eps)}; }

 private:
  const ModelConfig& config_;
  const WeightStore& weights_;
};

}  // namespace

Transformer build_transformer(const ModelConfig& config, const WeightStore& weights) {
  const Binder bind(config, weights);
  const Stack e = Stack::Encoder, d = Stack::Decoder;

  std::optional<Encoder> encoder;
  if (config.has_encoder()) {
    const auto positions =
        bind.self_attention_positions(e, config.encoder_attention_heads, config.encoder_head_dim());
    std::vector<EncoderLayer> layers;
    for (Index i = 0; i < config.encoder_layers; ++i)
      layers.push_back(EncoderLayer{bind.self_attention(e, i, config.encoder_attention_heads, positions),
                                    bind.norm(e, Role::SelfNorm, i), bind.feed_forward(e, i),
                                    bind.norm(e, Role::FeedForwardNorm, i)});
    encoder.emplace(bind.embedding(e), std::move(layers), bind.optional_norm(e, Role::FinalNorm), bind.placement());
  }

  const auto positions =
      bind.self_attention_positions(d, config.decoder_attention_heads, config.decoder_head_dim);
  std::vector<DecoderLayer> layers;
  for (Index i = 0; i < config.decoder_layers; ++i) {
    std::optional<CrossAttentionBlock> cross;
    if (config.has_encoder()) cross = bind.cross_attention(i);
    layers.push_back(DecoderLayer{bind.self_attention(d, i, config.decoder_attention_heads, positions),
                                  bind.norm(d, Role::SelfNorm, i), std::move(cross), bind.feed_forward(d, i),
                                  bind.norm(d, Role::FeedForwardNorm, i)});
  }

  // The output projection is the decoder's input embedding unless lm_head is untied.
  Linear output{config.tie_word_embeddings ? bind.matrix(d, Role::TokenEmbedding) : bind.matrix(d, Role::OutputHead),
                bind.tensor(d, Role::FinalLogitsBias)};
  if (!output.bias.empty())  // stored as [1, V]; a bias is a vector
    output.bias = TensorView(output.bias.data(), {config.decoder_vocab_size});

  SpecialTokens tokens{config.pad_token_id, config.eos_token_id, config.other_eos_token_ids,
                       config.decoder_start_token_id, config.bos_token_id};
  return Transformer{std::move(encoder),
                     Decoder(bind.embedding(d), std::move(layers), bind.optional_norm(d, Role::FinalNorm),
                             bind.placement(), output),
                     std::move(tokens)};
}

StackPositions stack_positions(const ModelConfig& config, const WeightStore& weights, Stack stack) {
  const Binder bind(config, weights);
  const bool encoder = stack == Stack::Encoder;
  const Index heads = encoder ? config.encoder_attention_heads : config.decoder_attention_heads;
  const Index head_dim = encoder ? config.encoder_head_dim() : config.decoder_head_dim;
  const auto attention = bind.self_attention_positions(stack, heads, head_dim);
  return {bind.positions(stack), attention.rotary, attention.bias, heads, head_dim};
}

}  // namespace ordo
