// The small JSON files beside a model's weights (tokenizer_config.json,
// generation_config.json, special_tokens_map.json): read whole within a size bound,
// parsed with the nesting limit, an object at the top level, or an Error naming the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace ordo {

// The object in `path`. Throws Error naming `path` when it holds more than `max_bytes`
// (`what` says what the file is: "a tokenizer_config.json"), is not valid JSON, nests
// deeper than kMaxJsonDepth or is not an object.
nlohmann::json read_json_object(const std::filesystem::path& path, std::uint64_t max_bytes, const std::string& what);

}  // namespace ordo
