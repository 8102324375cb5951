#include "models/build_transformer.h"

#include <cmath>
#include <memory>

#include "models/tensor_names.h"

namespace ordo {

namespace {

class Binder {
 public:
  Binder(const ModelConfig& config, const WeightStore& weights)
      : config_(config), weights_(weights) {}

  TensorView tensor(const std::string& name) const { return weights_.get(name); }
  Linear linear(const std::string& name) const {
    return {tensor(name + ".weight"), tensor(name + ".bias")};
  }
  NormWeights norm(const std::string& name) const {
    return {tensor(name + ".weight"), tensor(name + ".bias")};
  }
  AttentionWeights attention(const std::string& name) const {
    return {linear(name + ".q_proj"), linear(name + ".k_proj"), linear(name + ".v_proj"),
            linear(name + ".out_proj")};
  }

  // "encoder" or "decoder": token table, additive positions, optional embedding norm.
  Embedding embedding(const std::string& stack, const std::string& token_table) const {
    const float scale =
        config_.scale_embedding ? static_cast<float>(std::sqrt(static_cast<double>(config_.d_model)))
                                : 1.0f;
    std::optional<NormWeights> embedding_norm;
    if (config_.layernorm_embedding) embedding_norm = norm("model." + stack + ".layernorm_embedding");
    return Embedding(tensor(token_table), scale, positions(stack), embedding_norm,
                     static_cast<float>(config_.layer_norm_eps));
  }

  std::shared_ptr<const AdditivePositions> positions(const std::string& stack) const {
    switch (config_.position_encoding) {
      case PositionEncoding::Sinusoidal:
        return std::make_shared<SinusoidalPositions>(config_.d_model, config_.sinusoidal_layout,
                                                     config_.sinusoidal_frequencies,
                                                     config_.position_offset);
      case PositionEncoding::Learned:
        return std::make_shared<LearnedPositions>(
            tensor("model." + stack + ".embed_positions.weight"), config_.position_offset);
      case PositionEncoding::Rope:
      case PositionEncoding::None:
        return std::make_shared<NoPositions>();
    }
    return nullptr;
  }

  std::shared_ptr<const RotaryEmbedding> rotary(Index head_dim) const {
    if (config_.position_encoding != PositionEncoding::Rope) return nullptr;
    return std::make_shared<RotaryEmbedding>(head_dim, config_.rope_theta, config_.rope_layout,
                                             config_.position_offset);
  }

  std::optional<NormWeights> final_norm(const std::string& stack) const {
    if (!config_.normalize_before) return std::nullopt;
    return norm("model." + stack + ".layer_norm");
  }

  NormPlacement placement() const {
    return {config_.normalize_before, static_cast<float>(config_.layer_norm_eps)};
  }

 private:
  const ModelConfig& config_;
  const WeightStore& weights_;
};

}  // namespace

Transformer build_transformer(const ModelConfig& config, const WeightStore& weights) {
  const Binder bind(config, weights);
  const std::string encoder_table = config.share_encoder_decoder_embeddings
                                        ? "model.shared.weight"
                                        : "model.encoder.embed_tokens.weight";
  const std::string decoder_table = config.share_encoder_decoder_embeddings
                                        ? "model.shared.weight"
                                        : "model.decoder.embed_tokens.weight";

  const auto encoder_rotary = bind.rotary(config.encoder_head_dim());
  std::vector<EncoderLayer> encoder_layers;
  for (Index i = 0; i < config.encoder_layers; ++i) {
    const std::string p = encoder_layer_prefix(i);
    encoder_layers.push_back(EncoderLayer{
        MultiHeadAttention(bind.attention(p + "self_attn"), config.encoder_attention_heads,
                           encoder_rotary),
        bind.norm(p + "self_attn_layer_norm"),
        FeedForward::plain(bind.linear(p + "fc1"), bind.linear(p + "fc2"), config.activation_function),
        bind.norm(p + "final_layer_norm")});
  }

  const auto decoder_rotary = bind.rotary(config.decoder_head_dim());
  std::vector<DecoderLayer> decoder_layers;
  for (Index i = 0; i < config.decoder_layers; ++i) {
    const std::string p = decoder_layer_prefix(i);
    decoder_layers.push_back(DecoderLayer{
        MultiHeadAttention(bind.attention(p + "self_attn"), config.decoder_attention_heads,
                           decoder_rotary),
        bind.norm(p + "self_attn_layer_norm"),
        // Cross-attention is never rotated: source and target positions are unrelated.
        CrossAttentionBlock{MultiHeadAttention(bind.attention(p + "encoder_attn"), config.decoder_attention_heads,
                           nullptr),
        bind.norm(p + "encoder_attn_layer_norm")},
        FeedForward::plain(bind.linear(p + "fc1"), bind.linear(p + "fc2"), config.activation_function),
        bind.norm(p + "final_layer_norm")});
  }

  // The output projection is the decoder's input embedding unless lm_head is untied.
  Linear output{config.tie_word_embeddings ? bind.tensor(decoder_table) : bind.tensor("lm_head.weight"),
                bind.tensor("final_logits_bias")};
  if (!output.bias.empty())  // stored as [1, V]; a bias is a vector
    output.bias = TensorView(output.bias.data(), {config.decoder_vocab_size});

  return Transformer{
      Encoder(bind.embedding("encoder", encoder_table), std::move(encoder_layers),
              bind.final_norm("encoder"), bind.placement()),
      Decoder(bind.embedding("decoder", decoder_table), std::move(decoder_layers),
              bind.final_norm("decoder"), bind.placement(), output),
      SpecialTokens{config.pad_token_id, config.eos_token_id, {}, config.decoder_start_token_id, config.bos_token_id}};
}

}  // namespace ordo
