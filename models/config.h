// config.json -> ModelConfig: every key of the model directory format, with defaults.
//
// `model_type` picks the family: "ordo" (the default) is ordo's own format, below;
// "llama" is a Hugging Face LLaMA-family config.json as published (its keys are mapped
// onto these fields by models/llama_config.cpp), "marian" a Hugging Face MarianMTModel
// one (models/marian_config.cpp). Every family ends in the same
// ModelConfig, which the family's tensor table (models/tensor_names.h) expands.
//
// A missing required key, a value of the wrong JSON type, an unknown enum value or an
// inconsistent combination (d_model not divisible by heads, ...) throws ordo::Error
// naming the file and the key.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include <vector>

#include "engine/feed_forward.h"
#include "engine/ops.h"
#include "engine/positions.h"
#include "models/quantization_config.h"

namespace ordo {

// Sinusoidal and learned add vectors to the embeddings; rope rotates q and k; alibi and
// t5_relative bias the self-attention scores; none is the order-blind ablation.
enum class PositionEncoding { Sinusoidal, Learned, Rope, None, Alibi, T5Relative };

std::string_view position_encoding_name(PositionEncoding encoding);
std::string_view sinusoidal_layout_name(SinusoidalLayout layout);
std::string_view rope_layout_name(RopeLayout layout);

// The names config.json accepts, in the order of the one table the config reads (what
// tests iterate, so a new scheme or layout is covered the day it is added).
std::vector<std::string_view> position_encoding_names();
std::vector<std::string_view> sinusoidal_layout_names();
std::vector<std::string_view> rope_layout_names();

// Which tensor table and which config keys a model directory uses.
enum class Family { Ordo, Llama, Marian };

std::string_view family_name(Family family);

struct ModelConfig {
  std::string model_type = "ordo";
  Family family = Family::Ordo;  // from model_type
  Index vocab_size = 0;          // required
  Index decoder_vocab_size = 0;  // defaults to vocab_size
  Index d_model = 0;             // required
  Index encoder_layers = 0;      // required; 0 makes a decoder-only model
  Index decoder_layers = 0;      // required
  Index encoder_attention_heads = 0;  // required with encoder layers
  Index decoder_attention_heads = 0;  // required
  // K/V heads of the decoder's self-attention (grouped-query attention: query head h
  // reads K/V head h / (heads / kv_heads)). Optional; defaults to the head count.
  Index num_key_value_heads = 0;
  // The decoder's head width; d_model / decoder_attention_heads except where a family
  // sets it (LLaMA's head_dim).
  Index decoder_head_dim = 0;
  Index encoder_ffn_dim = 0;          // required with encoder layers
  Index decoder_ffn_dim = 0;          // required
  Activation activation_function = Activation::Relu;
  bool normalize_before = false;     // false: post-norm (Vaswani); true: pre-norm
  bool scale_embedding = false;      // embeddings * sqrt(d_model) before positions
  bool layernorm_embedding = false;  // a LayerNorm right after positions (BART)
  Index max_position_embeddings = 0; // required
  PositionEncoding position_encoding = PositionEncoding::Sinusoidal;
  SinusoidalLayout sinusoidal_layout = SinusoidalLayout::Interleaved;
  SinusoidalFrequencies sinusoidal_frequencies = SinusoidalFrequencies::Vaswani;
  Index position_offset = 0;
  double rope_theta = 10000.0;
  RopeLayout rope_layout = RopeLayout::Half;
  // rope_scaling (models/rope_scaling_config.h): none unless the config sets one.
  RopeScaling rope_scaling;
  // t5_relative: buckets of the [buckets, heads] bias table per stack, and the distance
  // beyond which all distances share a side's last bucket (T5's defaults).
  Index relative_attention_num_buckets = 32;
  Index relative_attention_max_distance = 128;
  bool share_encoder_decoder_embeddings = true;
  bool tie_word_embeddings = true;
  double layer_norm_eps = 1e-5;
  int pad_token_id = 0;              // required
  std::optional<int> bos_token_id;   // optional: ordo never needs it
  int eos_token_id = 0;              // required
  int decoder_start_token_id = 0;    // required with encoder layers; defaults to pad without
  std::vector<int> other_eos_token_ids;  // LLaMA's eos_token_id may list several
  // How the file stores quantized weight matrices (models/quantization_config.h).
  Quantization quantization;
  // Not from config.json: the format the matrices run in when the load asks for one
  // (--compute-type, LoadOptions::compute_type); unset: as stored.
  std::optional<Quantization> compute_type;

  // Fixed by the family, not read from ordo's config.json.
  NormKind norm_kind = NormKind::LayerNorm;
  FeedForwardKind feed_forward_kind = FeedForwardKind::Plain;
  bool attention_bias = true;  // q/k/v/out projections have biases
  bool mlp_bias = true;        // feed-forward linears have biases
  // Sinusoidal positions stop at max_position_embeddings, as a table of that many rows
  // would (Marian's); otherwise they are computed for any step.
  bool positions_bounded = false;

  bool has_encoder() const { return encoder_layers > 0; }
  Index encoder_head_dim() const { return d_model / encoder_attention_heads; }
  // Query heads per K/V head of the decoder's self-attention.
  Index grouped_query_ratio() const { return decoder_attention_heads / num_key_value_heads; }

  // Parses and validates. `source` names the file in error messages.
  static ModelConfig from_json(const nlohmann::json& json, const std::string& source);
  // The text of a config.json: parsed (nesting bounded) and validated as from_json does.
  static ModelConfig parse(std::string_view text, const std::string& source);
  static ModelConfig load(const std::filesystem::path& path);
  // Every key, defaults filled in (what `ordo inspect` prints), in the family's own
  // keys: ordo's below, or a LLaMA config.json's (models/llama_config.h).
  nlohmann::json to_json() const;

 private:
  nlohmann::json ordo_config_json() const;  // to_json's keys for ordo's own format
};

}  // namespace ordo
