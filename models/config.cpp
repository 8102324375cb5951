#include "models/config.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "models/json_message.h"

namespace ordo {
namespace {

using nlohmann::json;

// One row of an enum's name table: the spelling in config.json and the value.
template <class E>
struct EnumName {
  std::string_view name;
  E value;
};

constexpr EnumName<PositionEncoding> kPositionEncodings[] = {
    {"sinusoidal", PositionEncoding::Sinusoidal},
    {"learned", PositionEncoding::Learned},
    {"rope", PositionEncoding::Rope},
    {"none", PositionEncoding::None},
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

constexpr std::string_view kSupportedModelTypes[] = {"ordo"};

template <class E, std::size_t N>
std::string_view name_of(const EnumName<E> (&table)[N], E value) {
  for (const auto& entry : table)
    if (entry.value == value) return entry.name;
  return "?";
}

template <class Range>
std::string join(const Range& names) {
  std::string text;
  for (const auto& name : names) {
    if (!text.empty()) text += ", ";
    text += std::string(name);
  }
  return text;
}

// "a string", "a floating-point number", ... for wrong-type messages.
std::string describe_type(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean (" + value.dump() + ")";
    case json::value_t::string: return "a string (" + value.dump() + ")";
    case json::value_t::number_float: return "a floating-point number (" + value.dump() + ")";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer (" + value.dump() + ")";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    default: return "an unsupported JSON value";
  }
}

// Reads typed keys out of the config object; every error names `source` and the key.
class KeyReader {
 public:
  KeyReader(const json& object, const std::string& source) : object_(object), source_(source) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what,
                         const std::string& hint = "") const {
    throw Error(source_ + ": key '" + key + "'", what, hint);
  }

  const json* find(const std::string& key) const {
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  const json& require(const std::string& key) const {
    const json* value = find(key);
    if (value == nullptr)
      throw Error(source_, "missing required key '" + key + "'",
                  "every ordo config.json sets it; see models/config.h");
    return *value;
  }

  std::int64_t integer(const std::string& key, const json& value) const {
    if (value.is_number_unsigned()) {
      auto u = value.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail(key, "value " + value.dump() + " is too large");
      return static_cast<std::int64_t>(u);
    }
    if (value.is_number_integer()) return value.get<std::int64_t>();
    fail(key, "expected an integer, got " + describe_type(value));
  }

  // Required integer key.
  Index index(const std::string& key) const { return integer(key, require(key)); }
  // Optional integer key; `fallback` when absent.
  Index index(const std::string& key, Index fallback) const {
    const json* value = find(key);
    return value ? integer(key, *value) : fallback;
  }

  // A token id: a required integer that fits an int.
  int token_id(const std::string& key) const { return to_int(key, index(key)); }
  std::optional<int> optional_token_id(const std::string& key) const {
    const json* value = find(key);
    if (value == nullptr || value->is_null()) return std::nullopt;
    return to_int(key, integer(key, *value));
  }

  double real(const std::string& key, double fallback) const {
    const json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_number()) fail(key, "expected a number, got " + describe_type(*value));
    return value->get<double>();
  }

  bool boolean(const std::string& key, bool fallback) const {
    const json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean())
      fail(key, "expected true or false, got " + describe_type(*value));
    return value->get<bool>();
  }

  std::string string(const std::string& key, const std::string& fallback) const {
    const json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_string()) fail(key, "expected a string, got " + describe_type(*value));
    return value->get<std::string>();
  }

  template <class E, std::size_t N>
  E enumeration(const std::string& key, const EnumName<E> (&table)[N], E fallback) const {
    const json* value = find(key);
    if (value == nullptr) return fallback;
    const std::string name = string(key, "");
    for (const auto& entry : table)
      if (entry.name == name) return entry.value;
    std::vector<std::string_view> names;
    for (const auto& entry : table) names.push_back(entry.name);
    fail(key, "unknown value " + value->dump(), "expected one of: " + join(names));
  }

 private:
  int to_int(const std::string& key, Index value) const {
    if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max())
      fail(key, "value " + std::to_string(value) + " does not fit a 32-bit token id");
    return static_cast<int>(value);
  }

  const json& object_;
  const std::string& source_;
};

// Checks the parsed values; every message names the keys involved.
void validate(const ModelConfig& c, const KeyReader& keys) {
  bool supported = false;
  for (std::string_view type : kSupportedModelTypes) supported = supported || type == c.model_type;
  if (!supported)
    keys.fail("model_type", "unsupported model type \"" + c.model_type + "\"",
              "supported types: " + join(kSupportedModelTypes));

  // Sizes are bounded so that every product of two (a weight's element count, a
  // position-table row) fits in 64 bits and every single size in BLAS's int.
  constexpr Index kMaxSize = Index{1} << 24;
  const auto too_large = [&](const char* key, Index value) {
    if (value > kMaxSize)
      keys.fail(key, "is " + std::to_string(value) + ", more than ordo supports (" +
                         std::to_string(kMaxSize) + ")");
  };
  const auto positive = [&](const char* key, Index value) {
    if (value <= 0) keys.fail(key, "must be > 0, got " + std::to_string(value));
    too_large(key, value);
  };
  const auto non_negative = [&](const char* key, Index value) {
    if (value < 0) keys.fail(key, "must be >= 0, got " + std::to_string(value));
    too_large(key, value);
  };
  positive("vocab_size", c.vocab_size);
  positive("decoder_vocab_size", c.decoder_vocab_size);
  positive("d_model", c.d_model);
  non_negative("encoder_layers", c.encoder_layers);
  non_negative("decoder_layers", c.decoder_layers);
  positive("encoder_attention_heads", c.encoder_attention_heads);
  positive("decoder_attention_heads", c.decoder_attention_heads);
  positive("encoder_ffn_dim", c.encoder_ffn_dim);
  positive("decoder_ffn_dim", c.decoder_ffn_dim);
  positive("max_position_embeddings", c.max_position_embeddings);
  non_negative("position_offset", c.position_offset);

  const auto finite_positive = [&](const char* key, double value) {
    if (!(value > 0.0) || !std::isfinite(value)) {
      std::ostringstream text;
      text << "must be a finite number > 0, got " << value;
      keys.fail(key, text.str());
    }
  };
  finite_positive("rope_theta", c.rope_theta);
  finite_positive("layer_norm_eps", c.layer_norm_eps);
  // The engine computes with a float eps: it must survive the conversion.
  if (c.layer_norm_eps > 1.0)
    keys.fail("layer_norm_eps", "is " + std::to_string(c.layer_norm_eps) + ", expected a small number (<= 1)");
  if (!(static_cast<float>(c.layer_norm_eps) > 0.0f))
    keys.fail("layer_norm_eps", "is too small for float32 (it rounds to 0)");

  const auto divisible = [&](const char* heads_key, Index heads) {
    if (c.d_model % heads != 0)
      keys.fail(heads_key, "d_model=" + std::to_string(c.d_model) +
                               " is not divisible by " + heads_key + "=" + std::to_string(heads),
                "each head gets d_model / heads dimensions");
  };
  divisible("encoder_attention_heads", c.encoder_attention_heads);
  divisible("decoder_attention_heads", c.decoder_attention_heads);

  const auto token_in = [&](const char* key, int id, const char* vocab_key, Index vocab) {
    if (id < 0 || id >= vocab)
      keys.fail(key, "token id " + std::to_string(id) + " is outside [0, " + vocab_key + "=" +
                         std::to_string(vocab) + ")");
  };
  token_in("pad_token_id", c.pad_token_id, "vocab_size", c.vocab_size);
  token_in("pad_token_id", c.pad_token_id, "decoder_vocab_size", c.decoder_vocab_size);
  token_in("eos_token_id", c.eos_token_id, "decoder_vocab_size", c.decoder_vocab_size);
  token_in("decoder_start_token_id", c.decoder_start_token_id, "decoder_vocab_size",
           c.decoder_vocab_size);

  if (c.position_encoding == PositionEncoding::Sinusoidal) {
    if (c.d_model % 2 != 0)
      keys.fail("d_model", "sinusoidal positions need an even d_model, got " +
                               std::to_string(c.d_model),
                "or set position_encoding to learned, rope or none");
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
    even_head_dim("encoder_attention_heads", c.encoder_attention_heads);
    even_head_dim("decoder_attention_heads", c.decoder_attention_heads);
  }

  if (c.share_encoder_decoder_embeddings && c.vocab_size != c.decoder_vocab_size)
    keys.fail("share_encoder_decoder_embeddings",
              "true, but vocab_size=" + std::to_string(c.vocab_size) +
                  " differs from decoder_vocab_size=" + std::to_string(c.decoder_vocab_size),
              "set it to false for separate source and target vocabularies");
}

}  // namespace

std::string_view position_encoding_name(PositionEncoding encoding) {
  return name_of(kPositionEncodings, encoding);
}

ModelConfig ModelConfig::from_json(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object())
    throw Error(source, "expected a JSON object at the top level, got " + describe_type(json));
  const KeyReader keys(json, source);
  ModelConfig c;
  // Keys are read in the order of the struct; keys ordo does not know are ignored
  // (Hugging Face configs carry many).
  c.model_type = keys.string("model_type", c.model_type);
  c.vocab_size = keys.index("vocab_size");
  c.decoder_vocab_size = keys.index("decoder_vocab_size", c.vocab_size);
  c.d_model = keys.index("d_model");
  c.encoder_layers = keys.index("encoder_layers");
  c.decoder_layers = keys.index("decoder_layers");
  c.encoder_attention_heads = keys.index("encoder_attention_heads");
  c.decoder_attention_heads = keys.index("decoder_attention_heads");
  c.encoder_ffn_dim = keys.index("encoder_ffn_dim");
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
  c.share_encoder_decoder_embeddings =
      keys.boolean("share_encoder_decoder_embeddings", c.share_encoder_decoder_embeddings);
  c.tie_word_embeddings = keys.boolean("tie_word_embeddings", c.tie_word_embeddings);
  c.layer_norm_eps = keys.real("layer_norm_eps", c.layer_norm_eps);
  c.pad_token_id = keys.token_id("pad_token_id");
  c.bos_token_id = keys.optional_token_id("bos_token_id");  // null or absent: none
  c.eos_token_id = keys.token_id("eos_token_id");
  c.decoder_start_token_id = keys.token_id("decoder_start_token_id");
  validate(c, keys);
  return c;
}

ModelConfig ModelConfig::load(const std::filesystem::path& path) {
  const std::string source = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(source, "cannot open the model config",
                "a model directory holds config.json next to its weights");
  // Duplicate keys are not detected here: nlohmann keeps the last one, as Python's
  // json.load does for Hugging Face configs.
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // syntax, or a number out of range
    throw Error(source, "not valid JSON: " + json_message(e.what()));
  }
  return from_json(json, source);
}

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  j["model_type"] = model_type;
  j["vocab_size"] = vocab_size;
  j["decoder_vocab_size"] = decoder_vocab_size;
  j["d_model"] = d_model;
  j["encoder_layers"] = encoder_layers;
  j["decoder_layers"] = decoder_layers;
  j["encoder_attention_heads"] = encoder_attention_heads;
  j["decoder_attention_heads"] = decoder_attention_heads;
  j["encoder_ffn_dim"] = encoder_ffn_dim;
  j["decoder_ffn_dim"] = decoder_ffn_dim;
  j["activation_function"] = std::string(name_of(kActivations, activation_function));
  j["normalize_before"] = normalize_before;
  j["scale_embedding"] = scale_embedding;
  j["layernorm_embedding"] = layernorm_embedding;
  j["max_position_embeddings"] = max_position_embeddings;
  j["position_encoding"] = std::string(position_encoding_name(position_encoding));
  j["sinusoidal_layout"] = std::string(name_of(kSinusoidalLayouts, sinusoidal_layout));
  j["sinusoidal_frequencies"] =
      std::string(name_of(kSinusoidalFrequencies, sinusoidal_frequencies));
  j["position_offset"] = position_offset;
  j["rope_theta"] = rope_theta;
  j["rope_layout"] = std::string(name_of(kRopeLayouts, rope_layout));
  j["share_encoder_decoder_embeddings"] = share_encoder_decoder_embeddings;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["layer_norm_eps"] = layer_norm_eps;
  j["pad_token_id"] = pad_token_id;
  j["bos_token_id"] = bos_token_id ? nlohmann::json(*bos_token_id) : nlohmann::json(nullptr);
  j["eos_token_id"] = eos_token_id;
  j["decoder_start_token_id"] = decoder_start_token_id;
  return j;
}

}  // namespace ordo
