#include "models/config.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/regular_file.h"
#include "models/config_reader.h"
#include "models/json_message.h"
#include "models/llama_config.h"
#include "models/marian_config.h"
#include "models/rope_scaling_config.h"

namespace ordo {
namespace {

using namespace config_reader;

constexpr EnumName<PositionEncoding> kPositionEncodings[] = {
    {"sinusoidal", PositionEncoding::Sinusoidal},
    {"learned", PositionEncoding::Learned},
    {"rope", PositionEncoding::Rope},
    {"none", PositionEncoding::None},
    {"alibi", PositionEncoding::Alibi},
    {"t5_relative", PositionEncoding::T5Relative},
};
constexpr EnumName<SinusoidalLayout> kSinusoidalLayouts[] = {
    {"interleaved", SinusoidalLayout::Interleaved},
    {"split", SinusoidalLayout::Split},
};
constexpr EnumName<SinusoidalFrequencies> kSinusoidalFrequencies[] = {
    {"vaswani", SinusoidalFrequencies::Vaswani},
    {"tensor2tensor", SinusoidalFrequencies::Tensor2Tensor},
};
constexpr EnumName<RopeLayout> kRopeLayouts[] = {
    {"half", RopeLayout::Half},
    {"interleaved", RopeLayout::Interleaved},
};
// Hugging Face's names. "silu" is an alias: to_json writes the first name, "swish".
// gelu_new (the tanh approximation) is deliberately absent: mapping it to the erf form
// would silently change the numbers.
constexpr EnumName<Activation> kActivations[] = {
    {"relu", Activation::Relu},
    {"gelu", Activation::Gelu},
    {"swish", Activation::Silu},
    {"silu", Activation::Silu},
};

constexpr EnumName<Family> kFamilies[] = {
    {"ordo", Family::Ordo},
    {"llama", Family::Llama},
    {"marian", Family::Marian},
};
constexpr EnumName<NormKind> kNormKinds[] = {
    {"layer_norm", NormKind::LayerNorm},
    {"rms_norm", NormKind::RmsNorm},
};
constexpr EnumName<FeedForwardKind> kFeedForwardKinds[] = {
    {"plain", FeedForwardKind::Plain},
    {"gated", FeedForwardKind::Gated},
};

// Checks the parsed values of ordo's own format; every message names the keys involved.
void validate(const ModelConfig& c, const KeyReader& keys) {
  const Checks check(keys);
  check.positive("vocab_size", c.vocab_size);
  check.positive("decoder_vocab_size", c.decoder_vocab_size);
  check.positive("d_model", c.d_model);
  check.non_negative("encoder_layers", c.encoder_layers);
  check.non_negative("decoder_layers", c.decoder_layers);
  check.positive("decoder_attention_heads", c.decoder_attention_heads);
  check.positive("num_key_value_heads", c.num_key_value_heads);
  check.positive("decoder_ffn_dim", c.decoder_ffn_dim);
  if (c.has_encoder()) {
    check.positive("encoder_attention_heads", c.encoder_attention_heads);
    check.positive("encoder_ffn_dim", c.encoder_ffn_dim);
  }
  check.positive("max_position_embeddings", c.max_position_embeddings);
  check.non_negative("position_offset", c.position_offset);
  check.finite_positive("rope_theta", c.rope_theta);
  check.epsilon("layer_norm_eps", c.layer_norm_eps);

  const auto divisible = [&](const char* heads_key, Index heads) {
    if (c.d_model % heads != 0)
      keys.fail(heads_key, "d_model=" + std::to_string(c.d_model) +
                               " is not divisible by " + heads_key + "=" + std::to_string(heads),
                "each head gets d_model / heads dimensions");
  };
  if (c.has_encoder()) divisible("encoder_attention_heads", c.encoder_attention_heads);
  divisible("decoder_attention_heads", c.decoder_attention_heads);
  if (c.decoder_attention_heads % c.num_key_value_heads != 0)
    keys.fail("num_key_value_heads",
              "decoder_attention_heads=" + std::to_string(c.decoder_attention_heads) +
                  " is not divisible by num_key_value_heads=" + std::to_string(c.num_key_value_heads),
              "each K/V head serves the same number of query heads");

  check.token_in("pad_token_id", c.pad_token_id, "vocab_size", c.vocab_size);
  check.token_in("pad_token_id", c.pad_token_id, "decoder_vocab_size", c.decoder_vocab_size);
  check.token_in("eos_token_id", c.eos_token_id, "decoder_vocab_size", c.decoder_vocab_size);
  check.token_in("decoder_start_token_id", c.decoder_start_token_id, "decoder_vocab_size", c.decoder_vocab_size);
  if (c.bos_token_id) check.token_in("bos_token_id", *c.bos_token_id, "decoder_vocab_size", c.decoder_vocab_size);

  if (c.position_encoding == PositionEncoding::Sinusoidal) {
    if (c.d_model % 2 != 0)
      keys.fail("d_model", "sinusoidal positions need an even d_model, got " +
                               std::to_string(c.d_model),
                "or choose another position_encoding: learned, rope, alibi, t5_relative or none");
    if (c.sinusoidal_frequencies == SinusoidalFrequencies::Tensor2Tensor && c.d_model < 4)
      keys.fail("sinusoidal_frequencies",
                "tensor2tensor frequencies need d_model >= 4, got d_model=" +
                    std::to_string(c.d_model));
  }
  if (c.position_encoding == PositionEncoding::Rope) {
    const auto even_head_dim = [&](const char* heads_key, Index heads) {
      const Index head_dim = c.d_model / heads;
      if (head_dim % 2 != 0)
        keys.fail(heads_key, "rope needs an even head dimension, got d_model=" +
                                 std::to_string(c.d_model) + " / " + heads_key + "=" +
                                 std::to_string(heads) + " = " + std::to_string(head_dim));
    };
    if (c.has_encoder()) even_head_dim("encoder_attention_heads", c.encoder_attention_heads);
    even_head_dim("decoder_attention_heads", c.decoder_attention_heads);
  }

  if (c.position_encoding == PositionEncoding::T5Relative) {
    // The bucket function divides each side's buckets in two and takes
    // log(max_distance / exact buckets): fewer buckets or a shorter distance is no table.
    // Sizes like any other; the bias table itself stops at the longest distance a
    // sequence can have (engine/relative_positions.h), whatever max_distance says.
    check.at_most_max_size("relative_attention_num_buckets", c.relative_attention_num_buckets);
    check.at_most_max_size("relative_attention_max_distance", c.relative_attention_max_distance);
    if (c.relative_attention_num_buckets < 4)
      keys.fail("relative_attention_num_buckets",
                "t5_relative needs at least 4 buckets, got " + std::to_string(c.relative_attention_num_buckets),
                "T5 uses 32");
    if (c.relative_attention_max_distance <= c.relative_attention_num_buckets / 2)
      keys.fail("relative_attention_max_distance",
                "must be more than relative_attention_num_buckets / 2 = " +
                    std::to_string(c.relative_attention_num_buckets / 2) + ", got " +
                    std::to_string(c.relative_attention_max_distance),
                "T5 uses 128 with 32 buckets");
  }

  if (c.share_encoder_decoder_embeddings && c.vocab_size != c.decoder_vocab_size)
    keys.fail("share_encoder_decoder_embeddings",
              "true, but vocab_size=" + std::to_string(c.vocab_size) +
                  " differs from decoder_vocab_size=" + std::to_string(c.decoder_vocab_size),
              "set it to false for separate source and target vocabularies");
}

// ordo's own format (model_type "ordo").
ModelConfig ordo_config(const KeyReader& keys) {
  ModelConfig c;
  // Keys are read in the order of the struct; keys ordo does not know are ignored
  // (Hugging Face configs carry many).
  c.vocab_size = keys.index("vocab_size");
  c.decoder_vocab_size = keys.index("decoder_vocab_size", c.vocab_size);
  c.d_model = keys.index("d_model");
  c.encoder_layers = keys.index("encoder_layers");
  c.decoder_layers = keys.index("decoder_layers");
  // A decoder-only model (no encoder layers) needs no encoder shape.
  c.encoder_attention_heads = c.has_encoder() ? keys.index("encoder_attention_heads")
                                              : keys.index("encoder_attention_heads", 0);
  c.decoder_attention_heads = keys.index("decoder_attention_heads");
  c.num_key_value_heads = keys.index("num_key_value_heads", c.decoder_attention_heads);
  c.encoder_ffn_dim = c.has_encoder() ? keys.index("encoder_ffn_dim") : keys.index("encoder_ffn_dim", 0);
  c.decoder_ffn_dim = keys.index("decoder_ffn_dim");
  c.activation_function = keys.enumeration("activation_function", kActivations, c.activation_function);
  c.normalize_before = keys.boolean("normalize_before", c.normalize_before);
  c.scale_embedding = keys.boolean("scale_embedding", c.scale_embedding);
  c.layernorm_embedding = keys.boolean("layernorm_embedding", c.layernorm_embedding);
  c.max_position_embeddings = keys.index("max_position_embeddings");
  c.position_encoding =
      keys.enumeration("position_encoding", kPositionEncodings, c.position_encoding);
  c.sinusoidal_layout =
      keys.enumeration("sinusoidal_layout", kSinusoidalLayouts, c.sinusoidal_layout);
  c.sinusoidal_frequencies =
      keys.enumeration("sinusoidal_frequencies", kSinusoidalFrequencies, c.sinusoidal_frequencies);
  c.position_offset = keys.index("position_offset", c.position_offset);
  c.rope_theta = keys.real("rope_theta", c.rope_theta);
  c.rope_layout = keys.enumeration("rope_layout", kRopeLayouts, c.rope_layout);
  c.relative_attention_num_buckets =
      keys.index("relative_attention_num_buckets", c.relative_attention_num_buckets);
  c.relative_attention_max_distance =
      keys.index("relative_attention_max_distance", c.relative_attention_max_distance);
  c.share_encoder_decoder_embeddings =
      keys.boolean("share_encoder_decoder_embeddings", c.share_encoder_decoder_embeddings);
  c.tie_word_embeddings = keys.boolean("tie_word_embeddings", c.tie_word_embeddings);
  c.layer_norm_eps = keys.real("layer_norm_eps", c.layer_norm_eps);
  c.pad_token_id = keys.token_id("pad_token_id");
  c.bos_token_id = keys.optional_token_id("bos_token_id");  // null or absent: none
  c.eos_token_id = keys.token_id("eos_token_id");
  c.decoder_start_token_id = c.has_encoder() ? keys.token_id("decoder_start_token_id")
                                             : keys.optional_token_id("decoder_start_token_id").value_or(c.pad_token_id);
  validate(c, keys);
  c.decoder_head_dim = c.d_model / c.decoder_attention_heads;
  c.rope_scaling = read_rope_scaling(keys, c);
  return c;
}

}  // namespace

std::string_view position_encoding_name(PositionEncoding encoding) {
  return name_of(kPositionEncodings, encoding);
}

std::string_view sinusoidal_layout_name(SinusoidalLayout layout) { return name_of(kSinusoidalLayouts, layout); }
std::string_view rope_layout_name(RopeLayout layout) { return name_of(kRopeLayouts, layout); }

template <class E, std::size_t N>
std::vector<std::string_view> names_of(const EnumName<E> (&table)[N]) {
  std::vector<std::string_view> names;
  for (const auto& entry : table) names.push_back(entry.name);
  return names;
}

std::vector<std::string_view> position_encoding_names() { return names_of(kPositionEncodings); }
std::vector<std::string_view> sinusoidal_layout_names() { return names_of(kSinusoidalLayouts); }
std::vector<std::string_view> rope_layout_names() { return names_of(kRopeLayouts); }

std::string_view family_name(Family family) { return name_of(kFamilies, family); }

ModelConfig ModelConfig::from_json(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object())
    throw Error(source, "expected a JSON object at the top level, got " + describe_type(json));
  const KeyReader keys(json, source);
  const std::string type = keys.string("model_type", "ordo");
  ModelConfig c;
  if (type == "ordo") {
    c = ordo_config(keys);
  } else if (type == "llama") {
    c = llama_config(json, source);
  } else if (type == "marian") {
    c = marian_config(json, source);
  } else {
    std::vector<std::string_view> names;
    for (const auto& entry : kFamilies) names.push_back(entry.name);
    keys.fail("model_type", "unsupported model type " + json_excerpt(type), "supported types: " + join(names));
  }
  c.model_type = type;
  c.family = keys.enumeration("model_type", kFamilies, c.family);
  c.quantization = read_quantization(keys);  // every family's files may be quantized
  return c;
}

ModelConfig ModelConfig::load(const std::filesystem::path& path) {
  // A config is a few kilobytes; reading it whole must not become reading anything.
  constexpr std::uint64_t kMaxConfigBytes = 16u << 20;
  return parse(read_regular_file(path, kMaxConfigBytes, "a config.json"), path.string());
}

ModelConfig ModelConfig::parse(std::string_view text, const std::string& source) {
  // Duplicate keys are not detected here: nlohmann keeps the last one, as Python's
  // json.load does for Hugging Face configs.
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.begin(), text.end(), json_depth_limit(source));
  } catch (const nlohmann::json::exception& e) {  // syntax, or a number out of range
    throw Error(source, "not valid JSON: " + json_message(e.what()));
  }
  return from_json(json, source);
}

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j = family == Family::Llama    ? llama_config_json(*this)  // the family's own keys
                     : family == Family::Marian ? marian_config_json(*this)
                                                : ordo_config_json();
  if (quantization.enabled()) j["quantization"] = quantization_json(quantization);
  return j;
}

nlohmann::json ModelConfig::ordo_config_json() const {
  nlohmann::json j = nlohmann::json::object();
  j["model_type"] = model_type;
  j["norm"] = std::string(name_of(kNormKinds, norm_kind));
  j["feed_forward"] = std::string(name_of(kFeedForwardKinds, feed_forward_kind));
  j["attention_bias"] = attention_bias;
  j["mlp_bias"] = mlp_bias;
  j["vocab_size"] = vocab_size;
  j["decoder_vocab_size"] = decoder_vocab_size;
  j["d_model"] = d_model;
  j["encoder_layers"] = encoder_layers;
  j["decoder_layers"] = decoder_layers;
  j["encoder_attention_heads"] = encoder_attention_heads;
  j["decoder_attention_heads"] = decoder_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = decoder_head_dim;
  j["encoder_ffn_dim"] = encoder_ffn_dim;
  j["decoder_ffn_dim"] = decoder_ffn_dim;
  j["activation_function"] = std::string(name_of(kActivations, activation_function));
  j["normalize_before"] = normalize_before;
  j["scale_embedding"] = scale_embedding;
  j["layernorm_embedding"] = layernorm_embedding;
  j["max_position_embeddings"] = max_position_embeddings;
  j["position_encoding"] = std::string(position_encoding_name(position_encoding));
  j["sinusoidal_layout"] = std::string(sinusoidal_layout_name(sinusoidal_layout));
  j["sinusoidal_frequencies"] =
      std::string(name_of(kSinusoidalFrequencies, sinusoidal_frequencies));
  j["position_offset"] = position_offset;
  j["rope_theta"] = rope_theta;
  j["rope_layout"] = std::string(rope_layout_name(rope_layout));
  j["rope_scaling"] = rope_scaling_json(rope_scaling);
  j["relative_attention_num_buckets"] = relative_attention_num_buckets;
  j["relative_attention_max_distance"] = relative_attention_max_distance;
  j["share_encoder_decoder_embeddings"] = share_encoder_decoder_embeddings;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["layer_norm_eps"] = layer_norm_eps;
  j["pad_token_id"] = pad_token_id;
  j["bos_token_id"] = bos_token_id ? nlohmann::json(*bos_token_id) : nlohmann::json(nullptr);
  if (other_eos_token_ids.empty()) {
    j["eos_token_id"] = eos_token_id;
  } else {
    std::vector<int> all{eos_token_id};
    all.insert(all.end(), other_eos_token_ids.begin(), other_eos_token_ids.end());
    j["eos_token_id"] = all;
  }
  j["decoder_start_token_id"] = decoder_start_token_id;
  return j;
}

}  // namespace ordo
