#include "models/json_file.h"

#include "engine/error.h"
#include "engine/regular_file.h"
#include "models/json_message.h"

namespace ordo {

nlohmann::json read_json_object(const std::filesystem::path& path, std::uint64_t max_bytes, const std::string& what) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(read_regular_file(path, max_bytes, what), json_depth_limit(path.string()));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string(), "not valid JSON: " + json_message(e.what()));
  }
  if (!value.is_object()) throw Error(path.string(), "expected a JSON object at the top level");
  return value;
}

}  // namespace ordo
