// Weights split over several safetensors files, as Hugging Face publishes large
// checkpoints: model.safetensors.index.json maps each tensor name to its shard,
//   {"metadata": {...}, "weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors", ...}}
//
// open_weight_files() returns the files of a model directory: model.safetensors when it
// exists, else every shard the index names, each opened and validated as a single file
// is. The index is checked against the shards before any tensor is used: every shard
// exists and is a plain file name inside the directory (no path escapes it), every
// tensor the index maps is in its shard, and no tensor is in two shards or in a shard
// the index does not map it to.
#pragma once

#include <filesystem>
#include <vector>

#include "models/safetensors.h"

namespace ordo {

inline constexpr const char* kSingleWeightsFile = "model.safetensors";
inline constexpr const char* kShardIndexFile = "model.safetensors.index.json";

// Throws Error naming the file and the tensor at fault.
std::vector<SafetensorsFile> open_weight_files(const std::filesystem::path& directory);

}  // namespace ordo
