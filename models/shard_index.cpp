#include "models/shard_index.h"

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/printable.h"
#include "engine/regular_file.h"
#include "models/json_message.h"
#include "models/torch_bin.h"

namespace ordo {

namespace fs = std::filesystem;

namespace {

// An index lists a few thousand names at most; anything far larger is not an index.
constexpr std::uint64_t kMaxIndexBytes = 64u << 20;

nlohmann::json read_index(const fs::path& path) {
  const std::string text = read_regular_file(path, kMaxIndexBytes, "a shard index");
  try {
    return nlohmann::json::parse(text, json_depth_limit(path.string()));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string(), "not valid JSON: " + json_message(e.what()));
  }
}

// A shard is named by a plain file name in the model directory, nothing else.
void check_shard_name(const fs::path& index, const std::string& tensor, const std::string& shard) {
  const bool plain = !shard.empty() && shard != "." && shard != ".." &&
                     shard.find('/') == std::string::npos && shard.find('\\') == std::string::npos &&
                     shard.find('\0') == std::string::npos && printable(shard) == shard;  // no control bytes
  if (!plain)
    throw Error(index.string(), "weight_map puts tensor '" + printable(tensor) + "' in " + json_excerpt(shard) +
                                    ", which is not a file name inside the model directory",
                "shards must sit next to the index; paths are not allowed");
}

}  // namespace

fs::path weights_entry_file(const fs::path& directory) {
  for (const char* name : {kSingleWeightsFile, kShardIndexFile, kTorchWeightsFile, kTorchShardIndexFile})
    if (exists_quietly(directory / name)) return directory / name;
  return directory / kSingleWeightsFile;
}

std::vector<SafetensorsFile> open_weight_files(const fs::path& directory) {
  const fs::path index_path = weights_entry_file(directory);
  const std::string entry = index_path.filename().string();
  if (entry == kSingleWeightsFile || entry == kTorchWeightsFile) {
    std::vector<SafetensorsFile> files;
    files.push_back(entry == kSingleWeightsFile ? SafetensorsFile::open(index_path) : open_torch_bin(index_path));
    return files;
  }
  const auto open_shard = entry == kShardIndexFile ? &SafetensorsFile::open : &open_torch_bin;

  const nlohmann::json index = read_index(index_path);
  const std::string where = index_path.string();
  if (!index.is_object()) throw Error(where, "expected a JSON object with a \"weight_map\"");
  const auto map_entry = index.find("weight_map");
  if (map_entry == index.end() || !map_entry->is_object())
    throw Error(where, "has no \"weight_map\" object", "it maps each tensor name to its shard file");
  if (map_entry->empty()) throw Error(where, "\"weight_map\" is empty", "it maps each tensor name to its shard file");

  std::map<std::string, std::string> shard_of;  // tensor -> shard file name
  std::map<std::string, std::size_t> shards;    // shard file name -> position in `files`
  for (const auto& [tensor, shard] : map_entry->items()) {
    if (!shard.is_string())
      throw Error(where, "weight_map entry for tensor '" + printable(tensor) + "' is not a file name string");
    const std::string name = shard.get<std::string>();
    check_shard_name(index_path, tensor, name);
    shard_of[tensor] = name;
    shards.emplace(name, 0);
  }

  std::vector<SafetensorsFile> files;
  std::map<std::string, std::string> found_in;  // tensor -> the shard holding it
  for (auto& [name, position] : shards) {
    const fs::path path = directory / name;
    if (!exists_quietly(path))
      throw Error(where, "names shard \"" + name + "\", which is not in " + directory.string(),
                  "the checkpoint is incomplete: download every shard");
    position = files.size();
    files.push_back(open_shard(path));
    for (const TensorInfo& info : files.back().tensors()) {
      const auto [previous, fresh] = found_in.emplace(info.name, name);
      if (!fresh)
        throw Error(where, "tensor '" + printable(info.name) + "' is in two shards, \"" + previous->second + "\" and \"" + name + "\"",
                    "a checkpoint stores each tensor once");
    }
  }
  for (const auto& [tensor, shard] : found_in) {
    const auto mapped = shard_of.find(tensor);
    if (mapped == shard_of.end())
      throw Error(where, "shard \"" + shard + "\" holds tensor '" + printable(tensor) + "', which weight_map does not list");
    if (mapped->second != shard)
      throw Error(where, "shard \"" + shard + "\" holds tensor '" + printable(tensor) + "', which weight_map puts in \"" +
                             mapped->second + "\"");
  }
  for (const auto& [tensor, shard] : shard_of)
    if (!found_in.contains(tensor))
      throw Error(where, "weight_map puts tensor '" + printable(tensor) + "' in \"" + shard + "\", which does not hold it");
  return files;
}

}  // namespace ordo
