#include "models/tensor_names.h"

#include <array>
#include <string_view>

namespace ordo {

namespace {

// Symbolic dimensions, resolved against a config.
enum class Dim { Vocab, DecoderVocab, Model, EncoderFfn, DecoderFfn, PositionRows, One };

// When a tensor exists.
enum class When {
  Always,
  SharedEmbeddings,    // share_encoder_decoder_embeddings
  SeparateEmbeddings,  // !share_encoder_decoder_embeddings
  UntiedHead,          // !tie_word_embeddings
  LearnedPositions,    // position_encoding == learned
  EmbeddingNorm,       // layernorm_embedding
  PreNorm,             // normalize_before
  Optional,            // may be present in any model
};

// Where a name lives: once per model (Global), or once per encoder / decoder layer (the name is
// then relative to "model.{encoder,decoder}.layers.{i}.").
enum class Scope { Global, EncoderLayer, DecoderLayer };

struct Rule {
  Scope scope;
  std::string_view name;
  std::array<Dim, 2> dims;
  int rank;
  When when;
};

using enum Dim;
using enum When;
using enum Scope;

// PyTorch Linear layout: weight [out, in], bias [out].
constexpr Rule kRules[] = {
    // Embeddings and output projection.
    {Global, "model.shared.weight", {Vocab, Dim::Model}, 2, SharedEmbeddings},
    {Global, "model.encoder.embed_tokens.weight", {Vocab, Dim::Model}, 2, SeparateEmbeddings},
    {Global, "model.decoder.embed_tokens.weight", {DecoderVocab, Dim::Model}, 2, SeparateEmbeddings},
    {Global, "lm_head.weight", {DecoderVocab, Dim::Model}, 2, UntiedHead},
    {Global, "final_logits_bias", {One, DecoderVocab}, 2, Optional},
    // Positions and embedding normalization.
    {Global, "model.encoder.embed_positions.weight", {PositionRows, Dim::Model}, 2, LearnedPositions},
    {Global, "model.decoder.embed_positions.weight", {PositionRows, Dim::Model}, 2, LearnedPositions},
    {Global, "model.encoder.layernorm_embedding.weight", {Dim::Model}, 1, EmbeddingNorm},
    {Global, "model.encoder.layernorm_embedding.bias", {Dim::Model}, 1, EmbeddingNorm},
    {Global, "model.decoder.layernorm_embedding.weight", {Dim::Model}, 1, EmbeddingNorm},
    {Global, "model.decoder.layernorm_embedding.bias", {Dim::Model}, 1, EmbeddingNorm},
    // Final layer norms of pre-norm stacks.
    {Global, "model.encoder.layer_norm.weight", {Dim::Model}, 1, PreNorm},
    {Global, "model.encoder.layer_norm.bias", {Dim::Model}, 1, PreNorm},
    {Global, "model.decoder.layer_norm.weight", {Dim::Model}, 1, PreNorm},
    {Global, "model.decoder.layer_norm.bias", {Dim::Model}, 1, PreNorm},
    // Encoder layer: self-attention, feed-forward, their norms.
    {EncoderLayer, "self_attn.q_proj.weight", {Dim::Model, Dim::Model}, 2, Always},
    {EncoderLayer, "self_attn.q_proj.bias", {Dim::Model}, 1, Always},
    {EncoderLayer, "self_attn.k_proj.weight", {Dim::Model, Dim::Model}, 2, Always},
    {EncoderLayer, "self_attn.k_proj.bias", {Dim::Model}, 1, Always},
    {EncoderLayer, "self_attn.v_proj.weight", {Dim::Model, Dim::Model}, 2, Always},
    {EncoderLayer, "self_attn.v_proj.bias", {Dim::Model}, 1, Always},
    {EncoderLayer, "self_attn.out_proj.weight", {Dim::Model, Dim::Model}, 2, Always},
    {EncoderLayer, "self_attn.out_proj.bias", {Dim::Model}, 1, Always},
    {EncoderLayer, "self_attn_layer_norm.weight", {Dim::Model}, 1, Always},
    {EncoderLayer, "self_attn_layer_norm.bias", {Dim::Model}, 1, Always},
    {EncoderLayer, "fc1.weight", {EncoderFfn, Dim::Model}, 2, Always},
    {EncoderLayer, "fc1.bias", {EncoderFfn}, 1, Always},
    {EncoderLayer, "fc2.weight", {Dim::Model, EncoderFfn}, 2, Always},
    {EncoderLayer, "fc2.bias", {Dim::Model}, 1, Always},
    {EncoderLayer, "final_layer_norm.weight", {Dim::Model}, 1, Always},
    {EncoderLayer, "final_layer_norm.bias", {Dim::Model}, 1, Always},
    // Decoder layer: the same, plus cross-attention over the encoder output.
    {DecoderLayer, "self_attn.q_proj.weight", {Dim::Model, Dim::Model}, 2, Always},
    {DecoderLayer, "self_attn.q_proj.bias", {Dim::Model}, 1, Always},
    {DecoderLayer, "self_attn.k_proj.weight", {Dim::Model, Dim::Model}, 2, Always},
    {DecoderLayer, "self_attn.k_proj.bias", {Dim::Model}, 1, Always},
    {DecoderLayer, "self_attn.v_proj.weight", {Dim::Model, Dim::Model}, 2, Always},
    {DecoderLayer, "self_attn.v_proj.bias", {Dim::Model}, 1, Always},
    {DecoderLayer, "self_attn.out_proj.weight", {Dim::Model, Dim::Model}, 2, Always},
    {DecoderLayer, "self_attn.out_proj.bias", {Dim::Model}, 1, Always},
    {DecoderLayer, "self_attn_layer_norm.weight", {Dim::Model}, 1, Always},
    {DecoderLayer, "self_attn_layer_norm.bias", {Dim::Model}, 1, Always},
    {DecoderLayer, "encoder_attn.q_proj.weight", {Dim::Model, Dim::Model}, 2, Always},
    {DecoderLayer, "encoder_attn.q_proj.bias", {Dim::Model}, 1, Always},
    {DecoderLayer, "encoder_attn.k_proj.weight", {Dim::Model, Dim::Model}, 2, Always},
    {DecoderLayer, "encoder_attn.k_proj.bias", {Dim::Model}, 1, Always},
    {DecoderLayer, "encoder_attn.v_proj.weight", {Dim::Model, Dim::Model}, 2, Always},
    {DecoderLayer, "encoder_attn.v_proj.bias", {Dim::Model}, 1, Always},
    {DecoderLayer, "encoder_attn.out_proj.weight", {Dim::Model, Dim::Model}, 2, Always},
    {DecoderLayer, "encoder_attn.out_proj.bias", {Dim::Model}, 1, Always},
    {DecoderLayer, "encoder_attn_layer_norm.weight", {Dim::Model}, 1, Always},
    {DecoderLayer, "encoder_attn_layer_norm.bias", {Dim::Model}, 1, Always},
    {DecoderLayer, "fc1.weight", {DecoderFfn, Dim::Model}, 2, Always},
    {DecoderLayer, "fc1.bias", {DecoderFfn}, 1, Always},
    {DecoderLayer, "fc2.weight", {Dim::Model, DecoderFfn}, 2, Always},
    {DecoderLayer, "fc2.bias", {Dim::Model}, 1, Always},
    {DecoderLayer, "final_layer_norm.weight", {Dim::Model}, 1, Always},
    {DecoderLayer, "final_layer_norm.bias", {Dim::Model}, 1, Always},
};

bool applies(When when, const ModelConfig& c) {
  switch (when) {
    case Always: return true;
    case SharedEmbeddings: return c.share_encoder_decoder_embeddings;
    case SeparateEmbeddings: return !c.share_encoder_decoder_embeddings;
    case UntiedHead: return !c.tie_word_embeddings;
    case LearnedPositions: return c.position_encoding == PositionEncoding::Learned;
    case EmbeddingNorm: return c.layernorm_embedding;
    case PreNorm: return c.normalize_before;
    case Optional: return true;
  }
  return false;
}

Index resolve(Dim dim, const ModelConfig& c) {
  switch (dim) {
    case Vocab: return c.vocab_size;
    case DecoderVocab: return c.decoder_vocab_size;
    case Dim::Model: return c.d_model;
    case EncoderFfn: return c.encoder_ffn_dim;
    case DecoderFfn: return c.decoder_ffn_dim;
    case PositionRows: return c.max_position_embeddings + c.position_offset;
    case One: return 1;
  }
  return 0;
}

std::string_view meaning(Dim dim) {
  switch (dim) {
    case Vocab: return "vocab_size";
    case DecoderVocab: return "decoder_vocab_size";
    case Dim::Model: return "d_model";
    case EncoderFfn: return "encoder_ffn_dim";
    case DecoderFfn: return "decoder_ffn_dim";
    case PositionRows: return "max_position_embeddings + position_offset";
    case One: return "1";
  }
  return "?";
}

TensorSpec expand(const Rule& rule, const std::string& prefix, const ModelConfig& config) {
  TensorSpec spec;
  spec.name = prefix + std::string(rule.name);
  // Built in a local and moved in: assigning a literal to the member trips g++ 12's
  // bogus -Wrestrict (GCC bug 105329).
  std::string shape_meaning(1, '[');
  for (int i = 0; i < rule.rank; ++i) {
    const Dim dim = rule.dims[static_cast<std::size_t>(i)];
    spec.shape.push_back(resolve(dim, config));
    if (i > 0) shape_meaning += ", ";
    shape_meaning += std::string(meaning(dim)) + "=" + std::to_string(spec.shape.back());
  }
  spec.shape_meaning = std::move(shape_meaning) + "]";
  spec.required = rule.when != Optional;
  return spec;
}

}  // namespace

std::string encoder_layer_prefix(Index layer) {
  return "model.encoder.layers." + std::to_string(layer) + ".";
}
std::string decoder_layer_prefix(Index layer) {
  return "model.decoder.layers." + std::to_string(layer) + ".";
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& config) {
  std::vector<TensorSpec> specs;
  for (const Rule& rule : kRules) {
    if (!applies(rule.when, config)) continue;
    switch (rule.scope) {
        case Global:
        specs.push_back(expand(rule, "", config));
        break;
      case EncoderLayer:
        for (Index i = 0; i < config.encoder_layers; ++i)
          specs.push_back(expand(rule, encoder_layer_prefix(i), config));
        break;
      case DecoderLayer:
        for (Index i = 0; i < config.decoder_layers; ++i)
          specs.push_back(expand(rule, decoder_layer_prefix(i), config));
        break;
    }
  }
  return specs;
}

}  // namespace ordo
