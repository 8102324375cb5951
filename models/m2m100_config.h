// A Hugging Face M2M100 config.json (model_type "m2m_100": M2M100ForConditionalGeneration,
// the M2M100 and NLLB-200 checkpoints), as save_pretrained writes it, mapped onto
// ModelConfig. Every key of M2M100Config is read with transformers' own default when it
// is absent:
//
//   vocab_size [128112]           d_model [1024]          max_position_embeddings [1024]
//   encoder_layers [12]           decoder_layers [12]
//   encoder_attention_heads [16]  decoder_attention_heads [16]
//   encoder_ffn_dim [4096]        decoder_ffn_dim [4096]
//   activation_function ["relu"]: relu, gelu (erf form), swish or silu, gelu_new or
//                                 gelu_pytorch_tanh (the tanh form); anything else is an
//                                 error naming the key
//   scale_embedding [true]        pad_token_id [1]   bos_token_id [0]   eos_token_id [2]
//   decoder_start_token_id [2]    tie_word_embeddings [true; false is refused]
//   is_encoder_decoder [true; false is refused]
//   dropout, attention_dropout, activation_dropout, encoder_layerdrop, decoder_layerdrop,
//   init_std [numbers], use_cache [bool], tokenizer_class [string or null]: type-checked
//   and otherwise unused here (tokenizer_class is read by the tokenizer description).
//
// What the family fixes (M2M100 has no key for it): pre-norm layers with LayerNorm (eps
// 1e-5) and a final LayerNorm per stack, biases everywhere, a plain feed-forward,
// attention scaled by 1/sqrt(head_dim), and M2M100SinusoidalPositionalEmbedding's
// positions: tensor2tensor frequencies exp(-i ln(10000) / (d/2 - 1)), sin half then cos
// half, counted from the non-pad tokens only (a token's position is pad_token_id + the
// number of non-pad tokens up to it; a pad token gets the zero vector), never bounded
// (transformers grows the table). The head is tied to model.shared.weight.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "models/config.h"

namespace ordo {

// Throws Error naming `source` and the key for a missing, mistyped, out-of-range or
// unsupported value.
ModelConfig m2m100_config(const nlohmann::json& object, const std::string& source);

// The family's own keys for a config m2m100_config() read, defaults filled in, as
// M2M100Config spells them: what `ordo inspect` shows, and what reads back to the same
// ModelConfig.
nlohmann::json m2m100_config_json(const ModelConfig& config);

}  // namespace ordo
