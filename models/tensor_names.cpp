#include "models/tensor_names.h"

#include <array>
#include <set>
#include <span>
#include <string_view>

namespace ordo {

namespace {

// Symbolic dimensions, resolved against a config and a stack.
enum class Dim {
  Vocab,         // the stack's vocabulary
  Model,         // d_model
  Ffn,           // the stack's feed-forward width
  QueryWidth,    // heads x head_dim
  KvWidth,       // K/V heads x head_dim of self-attention
  PositionRows,  // max_position_embeddings + position_offset
  Buckets,       // relative_attention_num_buckets
  Heads,         // the stack's attention heads
  One,
};

// Conditions under which a tensor exists; a rule lists those it needs (all must hold).
enum Need : unsigned {
  kAlways = 0,
  kSharedEmbeddings = 1u << 0,    // share_encoder_decoder_embeddings
  kSeparateEmbeddings = 1u << 1,  // !share_encoder_decoder_embeddings
  kUntiedHead = 1u << 2,          // !tie_word_embeddings
  kLearnedPositions = 1u << 3,    // position_encoding == learned
  kEmbeddingNorm = 1u << 4,       // layernorm_embedding
  kPreNorm = 1u << 5,             // normalize_before
  kEncoder = 1u << 6,             // an encoder-decoder model (cross-attention)
  kAttentionBias = 1u << 7,       // attention_bias
  kMlpBias = 1u << 8,             // mlp_bias
  kOptional = 1u << 9,            // may be present in any model
  kT5Relative = 1u << 10,         // position_encoding == t5_relative
  kPlainFeedForward = 1u << 11,   // feed_forward_kind == plain
  kGatedFeedForward = 1u << 12,   // feed_forward_kind == gated
};

// Which stacks a rule is for.
enum Stacks : unsigned { kE = 1u << 0, kD = 1u << 1, kED = kE | kD };

struct Rule {
  unsigned stacks;
  Role role;
  Part part;
  std::string_view pattern;  // "{stack}": encoder or decoder; "{i}": the layer index
  std::array<Dim, 2> dims;
  int rank;
  unsigned needs;
};

using enum Dim;
using enum Role;
using enum Part;

// ordo's own format, BART/Marian style. PyTorch Linear layout: weight [out, in], bias [out].
constexpr Rule kOrdoTensors[] = {
    {kED, TokenEmbedding, Weight, "model.shared.weight", {Vocab, Model}, 2, kSharedEmbeddings},
    {kED, TokenEmbedding, Weight, "model.{stack}.embed_tokens.weight", {Vocab, Model}, 2, kSeparateEmbeddings},
    {kD, OutputHead, Weight, "lm_head.weight", {Vocab, Model}, 2, kUntiedHead},
    {kD, FinalLogitsBias, Weight, "final_logits_bias", {One, Vocab}, 2, kOptional},
    {kED, Positions, Weight, "model.{stack}.embed_positions.weight", {PositionRows, Model}, 2, kLearnedPositions},
    {kED, RelativeBias, Weight, "model.{stack}.relative_attention_bias.weight", {Buckets, Heads}, 2, kT5Relative},
    {kE, EmbeddingNorm, Weight, "model.encoder.layernorm_embedding.weight", {Model}, 1, kEmbeddingNorm},
    {kE, EmbeddingNorm, Bias, "model.encoder.layernorm_embedding.bias", {Model}, 1, kEmbeddingNorm},
    {kD, EmbeddingNorm, Weight, "model.decoder.layernorm_embedding.weight", {Model}, 1, kEmbeddingNorm},
    {kD, EmbeddingNorm, Bias, "model.decoder.layernorm_embedding.bias", {Model}, 1, kEmbeddingNorm},
    {kE, FinalNorm, Weight, "model.encoder.layer_norm.weight", {Model}, 1, kPreNorm},
    {kE, FinalNorm, Bias, "model.encoder.layer_norm.bias", {Model}, 1, kPreNorm},
    {kD, FinalNorm, Weight, "model.decoder.layer_norm.weight", {Model}, 1, kPreNorm},
    {kD, FinalNorm, Bias, "model.decoder.layer_norm.bias", {Model}, 1, kPreNorm},
    // Every layer: self-attention, then (decoder of an encoder-decoder model)
    // cross-attention over the encoder output, then the feed-forward; their norms.
    {kED, SelfQuery, Weight, "model.{stack}.layers.{i}.self_attn.q_proj.weight", {QueryWidth, Model}, 2, kAlways},
    {kED, SelfQuery, Bias, "model.{stack}.layers.{i}.self_attn.q_proj.bias", {QueryWidth}, 1, kAlways},
    {kED, SelfKey, Weight, "model.{stack}.layers.{i}.self_attn.k_proj.weight", {KvWidth, Model}, 2, kAlways},
    {kED, SelfKey, Bias, "model.{stack}.layers.{i}.self_attn.k_proj.bias", {KvWidth}, 1, kAlways},
    {kED, SelfValue, Weight, "model.{stack}.layers.{i}.self_attn.v_proj.weight", {KvWidth, Model}, 2, kAlways},
    {kED, SelfValue, Bias, "model.{stack}.layers.{i}.self_attn.v_proj.bias", {KvWidth}, 1, kAlways},
    {kED, SelfOutput, Weight, "model.{stack}.layers.{i}.self_attn.out_proj.weight", {Model, QueryWidth}, 2, kAlways},
    {kED, SelfOutput, Bias, "model.{stack}.layers.{i}.self_attn.out_proj.bias", {Model}, 1, kAlways},
    {kED, SelfNorm, Weight, "model.{stack}.layers.{i}.self_attn_layer_norm.weight", {Model}, 1, kAlways},
    {kED, SelfNorm, Bias, "model.{stack}.layers.{i}.self_attn_layer_norm.bias", {Model}, 1, kAlways},
    {kD, CrossQuery, Weight, "model.decoder.layers.{i}.encoder_attn.q_proj.weight", {QueryWidth, Model}, 2, kEncoder},
    {kD, CrossQuery, Bias, "model.decoder.layers.{i}.encoder_attn.q_proj.bias", {QueryWidth}, 1, kEncoder},
    {kD, CrossKey, Weight, "model.decoder.layers.{i}.encoder_attn.k_proj.weight", {QueryWidth, Model}, 2, kEncoder},
    {kD, CrossKey, Bias, "model.decoder.layers.{i}.encoder_attn.k_proj.bias", {QueryWidth}, 1, kEncoder},
    {kD, CrossValue, Weight, "model.decoder.layers.{i}.encoder_attn.v_proj.weight", {QueryWidth, Model}, 2, kEncoder},
    {kD, CrossValue, Bias, "model.decoder.layers.{i}.encoder_attn.v_proj.bias", {QueryWidth}, 1, kEncoder},
    {kD, CrossOutput, Weight, "model.decoder.layers.{i}.encoder_attn.out_proj.weight", {Model, QueryWidth}, 2, kEncoder},
    {kD, CrossOutput, Bias, "model.decoder.layers.{i}.encoder_attn.out_proj.bias", {Model}, 1, kEncoder},
    {kD, CrossNorm, Weight, "model.decoder.layers.{i}.encoder_attn_layer_norm.weight", {Model}, 1, kEncoder},
    {kD, CrossNorm, Bias, "model.decoder.layers.{i}.encoder_attn_layer_norm.bias", {Model}, 1, kEncoder},
    {kED, FeedForwardIn, Weight, "model.{stack}.layers.{i}.fc1.weight", {Ffn, Model}, 2, kAlways},
    {kED, FeedForwardIn, Bias, "model.{stack}.layers.{i}.fc1.bias", {Ffn}, 1, kAlways},
    {kED, FeedForwardOut, Weight, "model.{stack}.layers.{i}.fc2.weight", {Model, Ffn}, 2, kAlways},
    {kED, FeedForwardOut, Bias, "model.{stack}.layers.{i}.fc2.bias", {Model}, 1, kAlways},
    {kED, FeedForwardNorm, Weight, "model.{stack}.layers.{i}.final_layer_norm.weight", {Model}, 1, kAlways},
    {kED, FeedForwardNorm, Bias, "model.{stack}.layers.{i}.final_layer_norm.bias", {Model}, 1, kAlways},
};

// Hugging Face's LLaMA layout, as published: a decoder stack only, RMSNorm (no bias),
// SwiGLU, biases only where attention_bias / mlp_bias say.
constexpr Rule kLlamaTensors[] = {
    {kD, TokenEmbedding, Weight, "model.embed_tokens.weight", {Vocab, Model}, 2, kAlways},
    {kD, OutputHead, Weight, "lm_head.weight", {Vocab, Model}, 2, kUntiedHead},
    {kD, FinalNorm, Weight, "model.norm.weight", {Model}, 1, kAlways},
    {kD, SelfNorm, Weight, "model.layers.{i}.input_layernorm.weight", {Model}, 1, kAlways},
    {kD, SelfQuery, Weight, "model.layers.{i}.self_attn.q_proj.weight", {QueryWidth, Model}, 2, kAlways},
    {kD, SelfQuery, Bias, "model.layers.{i}.self_attn.q_proj.bias", {QueryWidth}, 1, kAttentionBias},
    {kD, SelfKey, Weight, "model.layers.{i}.self_attn.k_proj.weight", {KvWidth, Model}, 2, kAlways},
    {kD, SelfKey, Bias, "model.layers.{i}.self_attn.k_proj.bias", {KvWidth}, 1, kAttentionBias},
    {kD, SelfValue, Weight, "model.layers.{i}.self_attn.v_proj.weight", {KvWidth, Model}, 2, kAlways},
    {kD, SelfValue, Bias, "model.layers.{i}.self_attn.v_proj.bias", {KvWidth}, 1, kAttentionBias},
    {kD, SelfOutput, Weight, "model.layers.{i}.self_attn.o_proj.weight", {Model, QueryWidth}, 2, kAlways},
    {kD, SelfOutput, Bias, "model.layers.{i}.self_attn.o_proj.bias", {Model}, 1, kAttentionBias},
    {kD, FeedForwardNorm, Weight, "model.layers.{i}.post_attention_layernorm.weight", {Model}, 1, kAlways},
    {kD, FeedForwardIn, Weight, "model.layers.{i}.mlp.gate_proj.weight", {Ffn, Model}, 2, kAlways},
    {kD, FeedForwardIn, Bias, "model.layers.{i}.mlp.gate_proj.bias", {Ffn}, 1, kMlpBias},
    {kD, FeedForwardUp, Weight, "model.layers.{i}.mlp.up_proj.weight", {Ffn, Model}, 2, kAlways},
    {kD, FeedForwardUp, Bias, "model.layers.{i}.mlp.up_proj.bias", {Ffn}, 1, kMlpBias},
    {kD, FeedForwardOut, Weight, "model.layers.{i}.mlp.down_proj.weight", {Model, Ffn}, 2, kAlways},
    {kD, FeedForwardOut, Bias, "model.layers.{i}.mlp.down_proj.bias", {Model}, 1, kMlpBias},
};

// Hugging Face's MarianMTModel, as save_pretrained writes it: tied duplicates are left
// out (model.shared.weight stands for both stacks' embed_tokens, and for lm_head when
// tied); final_logits_bias and the sinusoid tables embed_positions are optional
// (transformers computes a missing table, and newer versions no longer save it).
// Post-norm: no stack has a final norm or an embedding norm.
constexpr Rule kMarianTensors[] = {
    {kED, TokenEmbedding, Weight, "model.shared.weight", {Vocab, Model}, 2, kSharedEmbeddings},
    {kED, TokenEmbedding, Weight, "model.{stack}.embed_tokens.weight", {Vocab, Model}, 2, kSeparateEmbeddings},
    {kD, OutputHead, Weight, "lm_head.weight", {Vocab, Model}, 2, kUntiedHead},
    {kD, FinalLogitsBias, Weight, "final_logits_bias", {One, Vocab}, 2, kOptional},
    {kED, Positions, Weight, "model.{stack}.embed_positions.weight", {PositionRows, Model}, 2, kOptional},
    {kED, SelfQuery, Weight, "model.{stack}.layers.{i}.self_attn.q_proj.weight", {QueryWidth, Model}, 2, kAlways},
    {kED, SelfQuery, Bias, "model.{stack}.layers.{i}.self_attn.q_proj.bias", {QueryWidth}, 1, kAlways},
    {kED, SelfKey, Weight, "model.{stack}.layers.{i}.self_attn.k_proj.weight", {KvWidth, Model}, 2, kAlways},
    {kED, SelfKey, Bias, "model.{stack}.layers.{i}.self_attn.k_proj.bias", {KvWidth}, 1, kAlways},
    {kED, SelfValue, Weight, "model.{stack}.layers.{i}.self_attn.v_proj.weight", {KvWidth, Model}, 2, kAlways},
    {kED, SelfValue, Bias, "model.{stack}.layers.{i}.self_attn.v_proj.bias", {KvWidth}, 1, kAlways},
    {kED, SelfOutput, Weight, "model.{stack}.layers.{i}.self_attn.out_proj.weight", {Model, QueryWidth}, 2, kAlways},
    {kED, SelfOutput, Bias, "model.{stack}.layers.{i}.self_attn.out_proj.bias", {Model}, 1, kAlways},
    {kED, SelfNorm, Weight, "model.{stack}.layers.{i}.self_attn_layer_norm.weight", {Model}, 1, kAlways},
    {kED, SelfNorm, Bias, "model.{stack}.layers.{i}.self_attn_layer_norm.bias", {Model}, 1, kAlways},
    {kD, CrossQuery, Weight, "model.decoder.layers.{i}.encoder_attn.q_proj.weight", {QueryWidth, Model}, 2, kEncoder},
    {kD, CrossQuery, Bias, "model.decoder.layers.{i}.encoder_attn.q_proj.bias", {QueryWidth}, 1, kEncoder},
    {kD, CrossKey, Weight, "model.decoder.layers.{i}.encoder_attn.k_proj.weight", {QueryWidth, Model}, 2, kEncoder},
    {kD, CrossKey, Bias, "model.decoder.layers.{i}.encoder_attn.k_proj.bias", {QueryWidth}, 1, kEncoder},
    {kD, CrossValue, Weight, "model.decoder.layers.{i}.encoder_attn.v_proj.weight", {QueryWidth, Model}, 2, kEncoder},
    {kD, CrossValue, Bias, "model.decoder.layers.{i}.encoder_attn.v_proj.bias", {QueryWidth}, 1, kEncoder},
    {kD, CrossOutput, Weight, "model.decoder.layers.{i}.encoder_attn.out_proj.weight", {Model, QueryWidth}, 2, kEncoder},
    {kD, CrossOutput, Bias, "model.decoder.layers.{i}.encoder_attn.out_proj.bias", {Model}, 1, kEncoder},
    {kD, CrossNorm, Weight, "model.decoder.layers.{i}.encoder_attn_layer_norm.weight", {Model}, 1, kEncoder},
    {kD, CrossNorm, Bias, "model.decoder.layers.{i}.encoder_attn_layer_norm.bias", {Model}, 1, kEncoder},
    {kED, FeedForwardIn, Weight, "model.{stack}.layers.{i}.fc1.weight", {Ffn, Model}, 2, kAlways},
    {kED, FeedForwardIn, Bias, "model.{stack}.layers.{i}.fc1.bias", {Ffn}, 1, kAlways},
    {kED, FeedForwardOut, Weight, "model.{stack}.layers.{i}.fc2.weight", {Model, Ffn}, 2, kAlways},
    {kED, FeedForwardOut, Bias, "model.{stack}.layers.{i}.fc2.bias", {Model}, 1, kAlways},
    {kED, FeedForwardNorm, Weight, "model.{stack}.layers.{i}.final_layer_norm.weight", {Model}, 1, kAlways},
    {kED, FeedForwardNorm, Bias, "model.{stack}.layers.{i}.final_layer_norm.bias", {Model}, 1, kAlways},
};

// Hugging Face's T5ForConditionalGeneration (t5, mt5), as save_pretrained writes it:
// shared.weight for both stacks, lm_head only when untied, the relative-position table
// in each stack's first block, RMS norms with
// weights only, no biases. Block i holds layer.0 (self-attention), in the decoder
// layer.1 (cross-attention), then the feed-forward (encoder layer.1, decoder layer.2):
// DenseReluDense.wi and wo, or wi_0 (the gate, activated) and wi_1 when gated. Optional
// and read by nothing, as transformers reads them: the tied duplicates save_pretrained
// leaves out (the stacks' embed_tokens, a tied lm_head) that older conversions hold, and
// the cross-attention bias table the original t5 checkpoints hold and transformers
// ignores on load (cross-attention has no position bias).
constexpr Rule kT5Tensors[] = {
    {kED, TokenEmbedding, Weight, "shared.weight", {Vocab, Model}, 2, kAlways},
    {kD, OutputHead, Weight, "lm_head.weight", {Vocab, Model}, 2, kUntiedHead},
    {kED, Unread, Weight, "{stack}.embed_tokens.weight", {Vocab, Model}, 2, kOptional},
    {kD, Unread, Weight, "lm_head.weight", {Vocab, Model}, 2, kOptional},  // tied: OutputHead's when untied
    {kD, Unread, Weight, "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight", {Buckets, Heads},
     2, kOptional},
    {kED, RelativeBias, Weight, "{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
     {Buckets, Heads}, 2, kT5Relative},
    {kED, FinalNorm, Weight, "{stack}.final_layer_norm.weight", {Model}, 1, kAlways},
    {kED, SelfQuery, Weight, "{stack}.block.{i}.layer.0.SelfAttention.q.weight", {QueryWidth, Model}, 2, kAlways},
    {kED, SelfKey, Weight, "{stack}.block.{i}.layer.0.SelfAttention.k.weight", {KvWidth, Model}, 2, kAlways},
    {kED, SelfValue, Weight, "{stack}.block.{i}.layer.0.SelfAttention.v.weight", {KvWidth, Model}, 2, kAlways},
    {kED, SelfOutput, Weight, "{stack}.block.{i}.layer.0.SelfAttention.o.weight", {Model, QueryWidth}, 2, kAlways},
    {kED, SelfNorm, Weight, "{stack}.block.{i}.layer.0.layer_norm.weight", {Model}, 1, kAlways},
    {kD, CrossQuery, Weight, "decoder.block.{i}.layer.1.EncDecAttention.q.weight", {QueryWidth, Model}, 2, kEncoder},
    {kD, CrossKey, Weight, "decoder.block.{i}.layer.1.EncDecAttention.k.weight", {QueryWidth, Model}, 2, kEncoder},
    {kD, CrossValue, Weight, "decoder.block.{i}.layer.1.EncDecAttention.v.weight", {QueryWidth, Model}, 2, kEncoder},
    {kD, CrossOutput, Weight, "decoder.block.{i}.layer.1.EncDecAttention.o.weight", {Model, QueryWidth}, 2, kEncoder},
    {kD, CrossNorm, Weight, "decoder.block.{i}.layer.1.layer_norm.weight", {Model}, 1, kEncoder},
    {kE, FeedForwardIn, Weight, "encoder.block.{i}.layer.1.DenseReluDense.wi.weight", {Ffn, Model}, 2, kPlainFeedForward},
    {kE, FeedForwardIn, Weight, "encoder.block.{i}.layer.1.DenseReluDense.wi_0.weight", {Ffn, Model}, 2, kGatedFeedForward},
    {kE, FeedForwardUp, Weight, "encoder.block.{i}.layer.1.DenseReluDense.wi_1.weight", {Ffn, Model}, 2, kGatedFeedForward},
    {kE, FeedForwardOut, Weight, "encoder.block.{i}.layer.1.DenseReluDense.wo.weight", {Model, Ffn}, 2, kAlways},
    {kE, FeedForwardNorm, Weight, "encoder.block.{i}.layer.1.layer_norm.weight", {Model}, 1, kAlways},
    {kD, FeedForwardIn, Weight, "decoder.block.{i}.layer.2.DenseReluDense.wi.weight", {Ffn, Model}, 2, kPlainFeedForward},
    {kD, FeedForwardIn, Weight, "decoder.block.{i}.layer.2.DenseReluDense.wi_0.weight", {Ffn, Model}, 2, kGatedFeedForward},
    {kD, FeedForwardUp, Weight, "decoder.block.{i}.layer.2.DenseReluDense.wi_1.weight", {Ffn, Model}, 2, kGatedFeedForward},
    {kD, FeedForwardOut, Weight, "decoder.block.{i}.layer.2.DenseReluDense.wo.weight", {Model, Ffn}, 2, kAlways},
    {kD, FeedForwardNorm, Weight, "decoder.block.{i}.layer.2.layer_norm.weight", {Model}, 1, kAlways},
};

// Hugging Face's M2M100ForConditionalGeneration (M2M100, NLLB-200), as save_pretrained
// writes it: model.shared.weight alone stands for both stacks' embed_tokens and lm_head
// (tied duplicates left out); no position table (M2M100's sinusoids are a buffer that
// is not saved); pre-norm, so each stack ends in layer_norm; no final_logits_bias.
constexpr Rule kM2M100Tensors[] = {
    {kED, TokenEmbedding, Weight, "model.shared.weight", {Vocab, Model}, 2, kAlways},
    {kE, FinalNorm, Weight, "model.encoder.layer_norm.weight", {Model}, 1, kAlways},
    {kE, FinalNorm, Bias, "model.encoder.layer_norm.bias", {Model}, 1, kAlways},
    {kD, FinalNorm, Weight, "model.decoder.layer_norm.weight", {Model}, 1, kAlways},
    {kD, FinalNorm, Bias, "model.decoder.layer_norm.bias", {Model}, 1, kAlways},
    {kED, SelfQuery, Weight, "model.{stack}.layers.{i}.self_attn.q_proj.weight", {QueryWidth, Model}, 2, kAlways},
    {kED, SelfQuery, Bias, "model.{stack}.layers.{i}.self_attn.q_proj.bias", {QueryWidth}, 1, kAlways},
    {kED, SelfKey, Weight, "model.{stack}.layers.{i}.self_attn.k_proj.weight", {KvWidth, Model}, 2, kAlways},
    {kED, SelfKey, Bias, "model.{stack}.layers.{i}.self_attn.k_proj.bias", {KvWidth}, 1, kAlways},
    {kED, SelfValue, Weight, "model.{stack}.layers.{i}.self_attn.v_proj.weight", {KvWidth, Model}, 2, kAlways},
    {kED, SelfValue, Bias, "model.{stack}.layers.{i}.self_attn.v_proj.bias", {KvWidth}, 1, kAlways},
    {kED, SelfOutput, Weight, "model.{stack}.layers.{i}.self_attn.out_proj.weight", {Model, QueryWidth}, 2, kAlways},
    {kED, SelfOutput, Bias, "model.{stack}.layers.{i}.self_attn.out_proj.bias", {Model}, 1, kAlways},
    {kED, SelfNorm, Weight, "model.{stack}.layers.{i}.self_attn_layer_norm.weight", {Model}, 1, kAlways},
    {kED, SelfNorm, Bias, "model.{stack}.layers.{i}.self_attn_layer_norm.bias", {Model}, 1, kAlways},
    {kD, CrossQuery, Weight, "model.decoder.layers.{i}.encoder_attn.q_proj.weight", {QueryWidth, Model}, 2, kEncoder},
    {kD, CrossQuery, Bias, "model.decoder.layers.{i}.encoder_attn.q_proj.bias", {QueryWidth}, 1, kEncoder},
    {kD, CrossKey, Weight, "model.decoder.layers.{i}.encoder_attn.k_proj.weight", {QueryWidth, Model}, 2, kEncoder},
    {kD, CrossKey, Bias, "model.decoder.layers.{i}.encoder_attn.k_proj.bias", {QueryWidth}, 1, kEncoder},
    {kD, CrossValue, Weight, "model.decoder.layers.{i}.encoder_attn.v_proj.weight", {QueryWidth, Model}, 2, kEncoder},
    {kD, CrossValue, Bias, "model.decoder.layers.{i}.encoder_attn.v_proj.bias", {QueryWidth}, 1, kEncoder},
    {kD, CrossOutput, Weight, "model.decoder.layers.{i}.encoder_attn.out_proj.weight", {Model, QueryWidth}, 2, kEncoder},
    {kD, CrossOutput, Bias, "model.decoder.layers.{i}.encoder_attn.out_proj.bias", {Model}, 1, kEncoder},
    {kD, CrossNorm, Weight, "model.decoder.layers.{i}.encoder_attn_layer_norm.weight", {Model}, 1, kEncoder},
    {kD, CrossNorm, Bias, "model.decoder.layers.{i}.encoder_attn_layer_norm.bias", {Model}, 1, kEncoder},
    {kED, FeedForwardIn, Weight, "model.{stack}.layers.{i}.fc1.weight", {Ffn, Model}, 2, kAlways},
    {kED, FeedForwardIn, Bias, "model.{stack}.layers.{i}.fc1.bias", {Ffn}, 1, kAlways},
    {kED, FeedForwardOut, Weight, "model.{stack}.layers.{i}.fc2.weight", {Model, Ffn}, 2, kAlways},
    {kED, FeedForwardOut, Bias, "model.{stack}.layers.{i}.fc2.bias", {Model}, 1, kAlways},
    {kED, FeedForwardNorm, Weight, "model.{stack}.layers.{i}.final_layer_norm.weight", {Model}, 1, kAlways},
    {kED, FeedForwardNorm, Bias, "model.{stack}.layers.{i}.final_layer_norm.bias", {Model}, 1, kAlways},
};

std::span<const Rule> table(Family family) {
  switch (family) {
    case Family::Ordo: return kOrdoTensors;
    case Family::Llama: return kLlamaTensors;
    case Family::Marian: return kMarianTensors;
    case Family::T5: return kT5Tensors;
    case Family::M2M100: return kM2M100Tensors;
  }
  return {};
}

bool per_layer(Role role) { return role >= SelfQuery; }

}  // namespace

bool is_matrix(Role role, Part part) {
  if (part != Part::Weight) return false;
  switch (role) {
    case TokenEmbedding:
    case OutputHead:
    case SelfQuery:
    case SelfKey:
    case SelfValue:
    case SelfOutput:
    case CrossQuery:
    case CrossKey:
    case CrossValue:
    case CrossOutput:
    case FeedForwardIn:
    case FeedForwardUp:
    case FeedForwardOut: return true;
    default: return false;
  }
}

namespace {

unsigned stack_bit(Stack stack) { return stack == Stack::Encoder ? kE : kD; }

bool holds(unsigned needs, const ModelConfig& c) {
  const auto need = [&](Need n, bool value) { return (needs & n) == 0 || value; };
  return need(kSharedEmbeddings, c.share_encoder_decoder_embeddings) &&
         need(kSeparateEmbeddings, !c.share_encoder_decoder_embeddings) &&
         need(kUntiedHead, !c.tie_word_embeddings) &&
         need(kLearnedPositions, c.position_encoding == PositionEncoding::Learned) &&
         need(kEmbeddingNorm, c.layernorm_embedding) && need(kPreNorm, c.normalize_before) &&
         need(kEncoder, c.has_encoder()) && need(kAttentionBias, c.attention_bias) &&
         need(kMlpBias, c.mlp_bias) && need(kT5Relative, c.position_encoding == PositionEncoding::T5Relative) &&
         need(kPlainFeedForward, c.feed_forward_kind == FeedForwardKind::Plain) &&
         need(kGatedFeedForward, c.feed_forward_kind == FeedForwardKind::Gated);
}

// A rule applies to a stack the model has, when its conditions hold.
bool applies(const Rule& rule, Stack stack, const ModelConfig& c) {
  if ((rule.stacks & stack_bit(stack)) == 0) return false;
  if (stack == Stack::Encoder && !c.has_encoder()) return false;
  return holds(rule.needs, c);
}

Index resolve(Dim dim, Stack stack, const ModelConfig& c) {
  const bool encoder = stack == Stack::Encoder;
  switch (dim) {
    case Vocab: return encoder ? c.vocab_size : c.decoder_vocab_size;
    case Model: return c.d_model;
    case Ffn: return encoder ? c.encoder_ffn_dim : c.decoder_ffn_dim;
    case QueryWidth: return encoder ? c.encoder_attention_heads * c.encoder_head_dim() : c.decoder_attention_heads * c.decoder_head_dim;
    case KvWidth: return encoder ? c.encoder_attention_heads * c.encoder_head_dim() : c.num_key_value_heads * c.decoder_head_dim;
    case PositionRows: return c.max_position_embeddings + c.position_offset;
    case Buckets: return c.relative_attention_num_buckets;
    case Heads: return encoder ? c.encoder_attention_heads : c.decoder_attention_heads;
    case One: return 1;
  }
  return 0;
}

// What a dimension is called in the family's own config.json, for error messages.
std::string meaning(Dim dim, Stack stack, const ModelConfig& c) {
  const bool encoder = stack == Stack::Encoder;
  const bool llama = c.family == Family::Llama;
  const bool t5 = c.family == Family::T5;
  switch (dim) {
    case Vocab: return encoder || llama || t5 ? "vocab_size" : "decoder_vocab_size";
    case Model: return llama ? "hidden_size" : "d_model";
    case Ffn: return llama ? "intermediate_size" : t5 ? "d_ff" : encoder ? "encoder_ffn_dim" : "decoder_ffn_dim";
    case QueryWidth:
      return t5 ? "num_heads x d_kv" : encoder ? "d_model" : llama ? "num_attention_heads x head_dim" : "d_model";
    case KvWidth: return t5 ? "num_heads x d_kv" : encoder ? "d_model" : "num_key_value_heads x head_dim";
    case PositionRows: return "max_position_embeddings + position_offset";
    case Buckets: return "relative_attention_num_buckets";
    case Heads:
      return t5 ? "num_heads" : encoder ? "encoder_attention_heads" : llama ? "num_attention_heads" : "decoder_attention_heads";
    case One: return "1";
  }
  return "?";
}

std::string expand_name(std::string_view pattern, Stack stack, Index layer) {
  std::string name;
  for (std::size_t i = 0; i < pattern.size();) {
    if (pattern.substr(i, 7) == "{stack}") {
      name += stack == Stack::Encoder ? "encoder" : "decoder";
      i += 7;
    } else if (pattern.substr(i, 3) == "{i}") {
      name += std::to_string(layer);
      i += 3;
    } else {
      name += pattern[i++];
    }
  }
  return name;
}

TensorSpec expand(const Rule& rule, Stack stack, Index layer, const ModelConfig& config) {
  TensorSpec spec;
  spec.name = expand_name(rule.pattern, stack, layer);
  // Built in a local and moved in: assigning a literal to the member trips g++ 12's
  // bogus -Wrestrict (GCC bug 105329).
  std::string shape_meaning(1, '[');
  for (int i = 0; i < rule.rank; ++i) {
    const Dim dim = rule.dims[static_cast<std::size_t>(i)];
    spec.shape.push_back(resolve(dim, stack, config));
    if (i > 0) shape_meaning += ", ";
    shape_meaning += meaning(dim, stack, config) + "=" + std::to_string(spec.shape.back());
  }
  spec.shape_meaning = std::move(shape_meaning) + "]";
  spec.required = (rule.needs & kOptional) == 0;
  spec.matrix = is_matrix(rule.role, rule.part);
  // Tied, the decoder's table is also the output head; an encoder's table of its own
  // (a name per stack, Marian's separate embeddings) never is.
  const bool own_encoder_table = stack == Stack::Encoder && rule.pattern.find("{stack}") != std::string_view::npos;
  spec.lookup_only = rule.role == TokenEmbedding && (!config.tie_word_embeddings || own_encoder_table);
  return spec;
}

}  // namespace

// In file order: the once-per-stack tensors, then the encoder's layers, then the
// decoder's, each rule over all layers in turn.
std::vector<TensorSpec> expected_tensors(const ModelConfig& config) {
  std::vector<TensorSpec> specs;
  std::set<std::string> named;  // a shared tensor is listed once
  const auto add = [&](const Rule& rule, Stack stack, Index layer) {
    TensorSpec spec = expand(rule, stack, layer, config);
    if (named.insert(spec.name).second) specs.push_back(std::move(spec));
  };
  const std::span<const Rule> rules = table(config.family);
  for (const Rule& rule : rules)
    for (const Stack stack : {Stack::Encoder, Stack::Decoder})
      if (!per_layer(rule.role) && applies(rule, stack, config)) add(rule, stack, 0);
  for (const Stack stack : {Stack::Encoder, Stack::Decoder}) {
    const Index layers = stack == Stack::Encoder ? config.encoder_layers : config.decoder_layers;
    for (const Rule& rule : rules)
      if (per_layer(rule.role) && applies(rule, stack, config))
        for (Index i = 0; i < layers; ++i) add(rule, stack, i);
  }
  return specs;
}

std::optional<std::string> tensor_name(const ModelConfig& config, Stack stack, Role role, Part part, Index layer) {
  for (const Rule& rule : table(config.family))
    if (rule.role == role && rule.part == part && applies(rule, stack, config))
      return expand_name(rule.pattern, stack, layer);
  return std::nullopt;
}

}  // namespace ordo
