// nlohmann::json made fit for ordo's error messages and safe on hostile files: its
// exception texts without the library prefix, short excerpts of bad values, and a
// nesting limit checked while parsing (a value nested 100,000 levels deep once crashed
// ordo when an error message printed it).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "engine/error.h"

namespace ordo {

// nlohmann's messages start with "[json.exception.parse_error.101] "; users need only
// what follows ("parse error at line 3, column 1: ...").
inline std::string json_message(const std::string& what) {
  if (what.rfind("[json.exception.", 0) == 0) {
    const auto end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}

// Deeper than any file ordo reads needs (a safetensors header is 3 levels, a config 2).
inline constexpr int kMaxJsonDepth = 32;

// Throws Error naming `source` when a parse reaches deeper than kMaxJsonDepth; for
// nlohmann's parser callbacks, before the nested value is built any further.
inline void check_json_depth(int depth, const std::string& source) {
  if (depth > kMaxJsonDepth)
    throw Error(source, "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep",
                "not a file ordo can read, or a corrupted one");
}

// A parser callback that only checks the depth.
inline nlohmann::json::parser_callback_t json_depth_limit(const std::string& source) {
  return [source](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    check_json_depth(depth, source);
    return true;
  };
}

// The text of a value for an error message, at most about 60 characters.
inline std::string json_excerpt(const nlohmann::json& value) {
  constexpr std::size_t kMax = 60;
  std::string text = value.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

}  // namespace ordo
