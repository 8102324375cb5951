// A Hugging Face T5 config.json (model_type "t5" or "mt5", T5ForConditionalGeneration:
// t5-small ... t5-11b, T5 v1.1, Flan-T5, mT5), as save_pretrained writes it, mapped onto
// ModelConfig. Every key of T5Config (MT5Config for "mt5") is read with transformers'
// own default when it is absent:
//
//   vocab_size [32128; mt5 250112]   d_model [512]    d_kv [64]: each head's width;
//   d_ff [2048; mt5 1024]            num_layers [6; mt5 8]   num_decoder_layers [= num_layers]
//   num_heads [8; mt5 6]             relative_attention_num_buckets [32]
//   relative_attention_max_distance [128]   layer_norm_epsilon [1e-6]
//   feed_forward_proj ["relu"; mt5 "gated-gelu"]: ACT or gated-ACT, ACT one of relu, gelu
//     (the erf form), gelu_new, gelu_pytorch_tanh, silu, swish; "gated-gelu" is gelu_new
//     (as T5Config says, for backward compatibility); anything else is an error naming
//     the key. dense_act_fn and is_gated_act, which save_pretrained writes beside it,
//     must agree with it.
//   tie_word_embeddings [true; mt5 false]   pad_token_id [0]   eos_token_id [1]
//   decoder_start_token_id [= pad_token_id; published configs say 0]
//   is_encoder_decoder [true]: false is an error
//   dropout_rate, classifier_dropout, initializer_factor [numbers], use_cache [bool]:
//   training settings, type-checked and otherwise unused.
//
// What the family fixes (T5 has no key for it): pre-norm layers with T5's RMS norm
// (weight, no bias, no mean subtraction), no bias anywhere, no position vectors and no
// embedding scaling, T5's relative-position buckets on every self-attention (one table
// per stack, held by its first block), attention scores not scaled by 1/sqrt(d_kv), a
// final norm per stack, and a tied head that reads the last hidden states times
// d_model^-0.5 (an untied lm_head does not).
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "models/config.h"

namespace ordo {

// Throws Error naming `source` and the key for a missing, mistyped, out-of-range or
// unsupported value. `model_type` ("t5" or "mt5") picks the defaults.
ModelConfig t5_config(const nlohmann::json& object, const std::string& source, const std::string& model_type);

// The family's own keys for a config t5_config() read, defaults filled in, as T5Config
// spells them: what `ordo inspect` shows, and what reads back to the same ModelConfig.
nlohmann::json t5_config_json(const ModelConfig& config);

}  // namespace ordo
