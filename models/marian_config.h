// A Hugging Face Marian config.json (model_type "marian", MarianMTModel: the opus-mt
// checkpoints), as save_pretrained writes it, mapped onto ModelConfig. Every key of
// MarianConfig is read with transformers' own default when it is absent:
//
//   vocab_size [58101]            decoder_vocab_size [= vocab_size; must equal it]
//   d_model [1024]                max_position_embeddings [1024]
//   encoder_layers [12]           decoder_layers [12]
//   encoder_attention_heads [16]  decoder_attention_heads [16]
//   encoder_ffn_dim [4096]        decoder_ffn_dim [4096]
//   activation_function ["gelu"]: gelu (erf form), relu, swish or silu, gelu_new or
//                                 gelu_pytorch_tanh (the tanh form); anything else is
//                                 an error naming the key
//   scale_embedding [false]       share_encoder_decoder_embeddings [true]
//   tie_word_embeddings [true]    pad_token_id [58100]   eos_token_id [0]
//   decoder_start_token_id [58100]   bos_token_id [none]
//   is_encoder_decoder [true]: false is an error (MarianMTModel is an encoder-decoder)
//   dropout, attention_dropout, activation_dropout, encoder_layerdrop,
//   decoder_layerdrop, init_std [numbers], use_cache [bool], forced_eos_token_id:
//   training or generation settings, type-checked and otherwise unused.
//
// What the family fixes (MarianMTModel has no key for it): post-norm layers with
// LayerNorm (eps 1e-5) and biases everywhere, a plain feed-forward, no embedding norm,
// sinusoidal positions in Marian's layout (sin of every frequency, then cos) from
// position 0, at most max_position_embeddings of them (the table's rows). Keys of
// older BART-style configs that MarianMTModel ignores (normalize_before,
// normalize_embedding, static_position_embeddings, add_bias_logits, ...) are ignored
// here too: transformers runs such a model as described above whatever they say.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "models/config.h"

namespace ordo {

// Throws Error naming `source` and the key for a missing, mistyped, out-of-range or
// unsupported value.
ModelConfig marian_config(const nlohmann::json& object, const std::string& source);

// The family's own keys for a config marian_config() read, defaults filled in, as
// MarianConfig spells them: what `ordo inspect` shows, and what reads back to the same
// ModelConfig.
nlohmann::json marian_config_json(const ModelConfig& config);

}  // namespace ordo
