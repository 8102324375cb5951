#include "models/rope_scaling_config.h"

#include <cmath>
#include <functional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/config.h"
#include "models/json_message.h"
#include "ordo/error.hpp"

namespace ordo {

using namespace config_reader;

namespace {

constexpr const char* kImplemented = "ordo implements linear, dynamic, yarn and llama3 (or null: plain RoPE)";

std::string number_text(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

// Reports a bad value: (key inside rope_scaling, what, hint).
using Fail = std::function<void(const std::string&, const std::string&, const std::string&)>;

// The heads RoPE rotates: the decoder's, and the encoder's when there is one.
Index narrowest_rotated_head(const ModelConfig& c) {
  Index narrowest = c.decoder_head_dim > 0 ? c.decoder_head_dim : c.d_model / c.decoder_attention_heads;
  if (c.has_encoder()) narrowest = std::min(narrowest, c.encoder_head_dim());
  return narrowest;
}

// The checks a config's rope_scaling and a run-time override share.
void check_scaling(const RopeScaling& s, const ModelConfig& c, const Fail& fail) {
  if (!s.enabled()) return;
  if (c.position_encoding != PositionEncoding::Rope)
    fail("", "is set, but this model has " + std::string(position_encoding_name(c.position_encoding)) +
                 " positions, not rope",
         "RoPE scaling changes rotation frequencies; leave it out (null)");
  if (!(s.factor > 0.0) || !std::isfinite(s.factor))
    fail("factor", "must be a finite number > 0, got " + number_text(s.factor), "published models use 2 to 32");
  if (s.type == RopeScalingType::Dynamic && narrowest_rotated_head(c) <= 2)
    fail("rope_type", "dynamic scaling needs a head dimension above 2, got " + std::to_string(narrowest_rotated_head(c)),
         "its base exponent is head_dim / (head_dim - 2); use linear or yarn");
  const bool bounded = s.type == RopeScalingType::Yarn || s.type == RopeScalingType::Llama3;
  if (s.type == RopeScalingType::Llama3 || s.original_max_position_embeddings != 0) {
    if (s.original_max_position_embeddings <= 0)
      fail("original_max_position_embeddings",
           "must be > 0, got " + std::to_string(s.original_max_position_embeddings),
           "the length the model was trained on");
    if (bounded && s.original_max_position_embeddings > c.max_position_embeddings)
      fail("original_max_position_embeddings",
           "is " + std::to_string(s.original_max_position_embeddings) + ", above max_position_embeddings=" +
               std::to_string(c.max_position_embeddings),
           "the trained length is at most the scaled one; check both keys");
  }
  if (s.type == RopeScalingType::Llama3) {
    for (const auto& [key, value] : {std::pair{"low_freq_factor", s.low_freq_factor},
                                     std::pair{"high_freq_factor", s.high_freq_factor}})
      if (!(value > 0.0) || !std::isfinite(value)) fail(key, "must be a finite number > 0, got " + number_text(value), "");
    if (!(s.low_freq_factor < s.high_freq_factor))
      fail("low_freq_factor",
           "must be below high_freq_factor, got low_freq_factor=" + number_text(s.low_freq_factor) +
               " and high_freq_factor=" + number_text(s.high_freq_factor),
           "Llama 3.1 uses 1 and 4");
  }
  if (s.type == RopeScalingType::Yarn) {
    for (const auto& [key, value] : {std::pair{"beta_fast", s.beta_fast}, std::pair{"beta_slow", s.beta_slow}})
      if (!(value > 0.0) || !std::isfinite(value)) fail(key, "must be a finite number > 0, got " + number_text(value), "");
    if (s.beta_fast < s.beta_slow)
      fail("beta_fast",
           "must be at least beta_slow, got beta_fast=" + number_text(s.beta_fast) +
               " and beta_slow=" + number_text(s.beta_slow),
           "YaRN uses 32 and 1");
    if (s.attention_factor && (!(*s.attention_factor > 0.0) || !std::isfinite(*s.attention_factor)))
      fail("attention_factor", "must be a finite number > 0, got " + number_text(*s.attention_factor), "");
  }
}

// Typed keys inside the rope_scaling object; errors name "rope_scaling.<key>".
class ScalingKeys {
 public:
  ScalingKeys(const json& object, const KeyReader& outer) : object_(object), outer_(outer) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what, const std::string& hint = "") const {
    outer_.fail(key.empty() ? "rope_scaling" : "rope_scaling." + key, what, hint);
  }
  // Present and not null (transformers reads an optional key with .get(): null = unset).
  const json* find(const std::string& key) const {
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  double number(const std::string& key) const {
    const json* value = find(key);
    if (value == nullptr) fail(key, "is missing", "every " + type_ + " scaling sets it");
    return number(key, *value);
  }
  double number(const std::string& key, double fallback) const {
    const json* value = find(key);
    return value == nullptr ? fallback : number(key, *value);
  }
  std::optional<double> optional_number(const std::string& key) const {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    return number(key, *value);
  }
  Index index(const std::string& key, bool required) const {
    const json* value = find(key);
    if (value == nullptr) {
      if (required) fail(key, "is missing", "every " + type_ + " scaling sets it");
      return 0;
    }
    return outer_.integer("rope_scaling." + key, *value);
  }
  bool boolean(const std::string& key, bool fallback) const {
    const json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) fail(key, "expected true or false, got " + describe_type(*value));
    return value->get<bool>();
  }
  void set_type(std::string type) { type_ = std::move(type); }

 private:
  double number(const std::string& key, const json& value) const {
    if (!value.is_number()) fail(key, "expected a number, got " + describe_type(value));
    return value.get<double>();
  }

  const json& object_;
  const KeyReader& outer_;
  std::string type_;
};

// The keys each type has, beside rope_type/type (transformers' required and optional keys).
std::set<std::string> keys_of(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::None: return {};
    case RopeScalingType::Linear: return {"factor"};
    case RopeScalingType::Dynamic: return {"factor", "original_max_position_embeddings"};
    case RopeScalingType::Yarn:
      return {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "attention_factor", "truncate"};
    case RopeScalingType::Llama3:
      return {"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"};
  }
  return {};
}

}  // namespace

RopeScalingType rope_scaling_type_of(std::string_view name, bool& known) {
  known = true;
  if (name == "default" || name == "none") return RopeScalingType::None;
  if (name == "linear") return RopeScalingType::Linear;
  if (name == "dynamic") return RopeScalingType::Dynamic;
  if (name == "yarn") return RopeScalingType::Yarn;
  if (name == "llama3") return RopeScalingType::Llama3;
  known = false;
  return RopeScalingType::None;
}

RopeScaling read_rope_scaling(const KeyReader& keys, const ModelConfig& config) {
  const json* value = keys.find("rope_scaling");
  if (value == nullptr || value->is_null()) return {};
  if (!value->is_object())
    keys.fail("rope_scaling", "expected an object or null, got " + describe_type(*value),
              "e.g. {\"rope_type\": \"linear\", \"factor\": 2.0}");
  ScalingKeys scaling(*value, keys);

  // rope_type, or the older "type"; both present, they must agree.
  const json* rope_type = scaling.find("rope_type");
  const json* old_type = scaling.find("type");
  if (rope_type == nullptr && old_type == nullptr)
    scaling.fail("rope_type", "is missing", std::string(kImplemented) + "; the older key \"type\" also works");
  for (const json* t : {rope_type, old_type})
    if (t != nullptr && !t->is_string())
      scaling.fail(t == rope_type ? "rope_type" : "type", "expected a string, got " + describe_type(*t));
  if (rope_type != nullptr && old_type != nullptr && *rope_type != *old_type)
    scaling.fail("type", "is " + json_excerpt(*old_type) + " but rope_type is " + json_excerpt(*rope_type),
                 "they name the same thing; keep one");
  const std::string name = (rope_type != nullptr ? rope_type : old_type)->get<std::string>();
  const char* type_key = rope_type != nullptr ? "rope_type" : "type";
  bool known = false;
  RopeScaling s;
  s.type = rope_scaling_type_of(name, known);
  if (!known || name == "none")
    scaling.fail(type_key, (name == "longrope" ? "longrope is not supported" : "unknown type " + json_excerpt(name)),
                 kImplemented);
  scaling.set_type(name);

  const std::set<std::string> allowed = keys_of(s.type);
  for (const auto& [key, _] : value->items())
    if (key != "rope_type" && key != "type" && !allowed.contains(key))
      scaling.fail(key, "is not a key of " + name + " scaling, and ordo does not implement it",
                   allowed.empty() ? "plain RoPE takes no parameters"
                                   : "a " + name + " scaling has: " + join(allowed));

  switch (s.type) {
    case RopeScalingType::None:
      return s;
    case RopeScalingType::Linear:
      s.factor = scaling.number("factor");
      break;
    case RopeScalingType::Dynamic:
      s.factor = scaling.number("factor");
      s.original_max_position_embeddings = scaling.index("original_max_position_embeddings", false);
      break;
    case RopeScalingType::Yarn:
      s.factor = scaling.number("factor");
      s.original_max_position_embeddings = scaling.index("original_max_position_embeddings", false);
      s.beta_fast = scaling.number("beta_fast", s.beta_fast);
      s.beta_slow = scaling.number("beta_slow", s.beta_slow);
      s.attention_factor = scaling.optional_number("attention_factor");
      s.truncate = scaling.boolean("truncate", s.truncate);
      break;
    case RopeScalingType::Llama3:
      s.factor = scaling.number("factor");
      s.low_freq_factor = scaling.number("low_freq_factor");
      s.high_freq_factor = scaling.number("high_freq_factor");
      s.original_max_position_embeddings = scaling.index("original_max_position_embeddings", true);
      break;
  }
  check_scaling(s, config, [&](const std::string& key, const std::string& what, const std::string& hint) {
    scaling.fail(key, what, hint);
  });
  return s;
}

nlohmann::json rope_scaling_json(const RopeScaling& s) {
  if (!s.enabled()) return nullptr;
  json j = json::object();
  j["rope_type"] = std::string(rope_scaling_type_name(s.type));
  j["factor"] = s.factor;
  if (s.original_max_position_embeddings > 0)
    j["original_max_position_embeddings"] = s.original_max_position_embeddings;
  if (s.type == RopeScalingType::Yarn) {
    j["beta_fast"] = s.beta_fast;
    j["beta_slow"] = s.beta_slow;
    j["attention_factor"] = s.attention_factor ? json(*s.attention_factor) : json(nullptr);
    j["truncate"] = s.truncate;
  }
  if (s.type == RopeScalingType::Llama3) {
    j["low_freq_factor"] = s.low_freq_factor;
    j["high_freq_factor"] = s.high_freq_factor;
  }
  return j;
}

void override_rope_scaling(ModelConfig& config, RopeScalingType type, double factor) {
  RopeScaling s;
  if (config.rope_scaling.type == type) s = config.rope_scaling;  // the config's own parameters
  s.type = type;
  s.factor = factor;
  if (type == RopeScalingType::Llama3 && s.original_max_position_embeddings == 0)
    s.original_max_position_embeddings = config.max_position_embeddings;
  check_scaling(s, config, [&](const std::string& key, const std::string& what, const std::string& hint) {
    throw OptionError("rope_scaling", (key.empty() ? "" : key + " ") + what + (hint.empty() ? "" : " (" + hint + ")"));
  });
  config.rope_scaling = s;
}

}  // namespace ordo
