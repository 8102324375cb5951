// nlohmann::json's exception texts, made fit for an ordo error message.
#pragma once

#include <string>

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

}  // namespace ordo
