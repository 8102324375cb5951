// A Hugging Face LLaMA-family config.json (model_type "llama"), as published, mapped
// onto ModelConfig: a decoder-only, pre-norm stack with RMSNorm, SwiGLU feed-forward,
// grouped-query attention and RoPE in the rotate_half layout, positions from 0.
//
//   hidden_size -> d_model              intermediate_size -> decoder_ffn_dim
//   num_hidden_layers -> decoder_layers  num_attention_heads -> decoder_attention_heads
//   num_key_value_heads [= heads]        head_dim [= hidden_size / heads]
//   rms_norm_eps [1e-6] -> layer_norm_eps   rope_theta [10000]
//   max_position_embeddings [2048]       vocab_size
//   tie_word_embeddings [false]          attention_bias [false]   mlp_bias [false]
//   bos_token_id, eos_token_id (an int or a list), pad_token_id [none: eos pads]
//   hidden_act [silu]: anything else is an error; rope_scaling: null, absent, linear,
//   dynamic, yarn or llama3 (models/rope_scaling_config.h); torch_dtype: informational.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "models/config.h"

namespace ordo {

// Throws Error naming `source` and the key for a missing, mistyped, out-of-range or
// unsupported value.
ModelConfig llama_config(const nlohmann::json& object, const std::string& source);

// The family's own keys for a config llama_config() read (defaults filled in), as
// Hugging Face spells them: what `ordo inspect` shows, and what reads back to the same
// ModelConfig. ordo's internal names (d_model, "swish") and settings the family fixes
// or does not have (positions, layouts, biases of T5) are left out.
nlohmann::json llama_config_json(const ModelConfig& config);

}  // namespace ordo
