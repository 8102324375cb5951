// Reading config.json: typed keys with errors that name the file and the key, enum
// name tables, and range checks. Shared by every model family's config reader
// (models/config.cpp for ordo's own format, models/llama_config.cpp for LLaMA).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/printable.h"
#include "engine/tensor.h"
#include "models/json_message.h"

namespace ordo::config_reader {

using nlohmann::json;

// One row of an enum's name table: the spelling in config.json and the value.
template <class E>
struct EnumName {
  std::string_view name;
  E value;
};


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
inline std::string describe_type(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean (" + json_excerpt(value) + ")";
    case json::value_t::string: return "a string (" + json_excerpt(value) + ")";
    case json::value_t::number_float: return "a floating-point number (" + json_excerpt(value) + ")";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer (" + json_excerpt(value) + ")";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    default: return "an unsupported JSON value";
  }
}

// Reads typed keys out of the config object; every error names `source` and the key.
class KeyReader {
 public:
  // `required_hint` is what an error for a missing required key suggests.
  KeyReader(const json& object, const std::string& source,
            std::string required_hint = "every ordo config.json sets it; see models/config.h")
      : object_(object), source_(source), required_hint_(std::move(required_hint)) {}

  // The key is escaped: an unknown key is the file's text, and must not drive the terminal.
  [[noreturn]] void fail(const std::string& key, const std::string& what,
                         const std::string& hint = "") const {
    throw Error(source_ + ": key '" + printable(key) + "'", what, hint);
  }

  const json* find(const std::string& key) const {
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  const json& require(const std::string& key) const {
    const json* value = find(key);
    if (value == nullptr)
      throw Error(source_, "missing required key '" + printable(key) + "'",
                  required_hint_);
    return *value;
  }

  std::int64_t integer(const std::string& key, const json& value) const {
    if (value.is_number_unsigned()) {
      auto u = value.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail(key, "value " + json_excerpt(value) + " is too large");
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
    fail(key, "unknown value " + json_excerpt(*value), "expected one of: " + join(names));
  }

 private:
  int to_int(const std::string& key, Index value) const {
    if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max())
      fail(key, "value " + std::to_string(value) + " does not fit a 32-bit token id");
    return static_cast<int>(value);
  }

  const json& object_;
  const std::string& source_;
  std::string required_hint_;
};

// Sizes are bounded so that every product of two (a weight's element count, a
// position-table row) fits in 64 bits and every single size in BLAS's int.
inline constexpr Index kMaxSize = Index{1} << 24;

// Range checks whose errors name the key.
class Checks {
 public:
  explicit Checks(const KeyReader& keys) : keys_(keys) {}

  void at_most_max_size(const std::string& key, Index value) const {
    if (value > kMaxSize)
      keys_.fail(key, "is " + std::to_string(value) + ", more than ordo supports (" + std::to_string(kMaxSize) + ")");
  }
  void positive(const std::string& key, Index value) const {
    if (value <= 0) keys_.fail(key, "must be > 0, got " + std::to_string(value));
    at_most_max_size(key, value);
  }
  void non_negative(const std::string& key, Index value) const {
    if (value < 0) keys_.fail(key, "must be >= 0, got " + std::to_string(value));
    at_most_max_size(key, value);
  }
  void finite_positive(const std::string& key, double value) const {
    if (!(value > 0.0) || !std::isfinite(value)) {
      std::ostringstream text;
      text << "must be a finite number > 0, got " << value;
      keys_.fail(key, text.str());
    }
  }
  // A norm's epsilon: the engine computes with a float, so it must survive conversion.
  void epsilon(const std::string& key, double value) const {
    finite_positive(key, value);
    if (value > 1.0) keys_.fail(key, "is " + std::to_string(value) + ", expected a small number (<= 1)");
    if (!(static_cast<float>(value) > 0.0f)) keys_.fail(key, "is too small for float32 (it rounds to 0)");
  }
  void token_in(const std::string& key, int id, const std::string& vocab_key, Index vocab) const {
    if (id < 0 || id >= vocab)
      keys_.fail(key, "token id " + std::to_string(id) + " is outside [0, " + vocab_key + "=" +
                          std::to_string(vocab) + ")");
  }

 private:
  const KeyReader& keys_;
};

}  // namespace ordo::config_reader
