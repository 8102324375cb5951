// Weights split over several safetensors files, as Hugging Face publishes large
// checkpoints: model.safetensors.index.json maps each tensor name to its shard,
//   {"metadata": {...}, "weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors", ...}}
// and pytorch_model.bin.index.json likewise to pytorch_model-0000i-of-0000N.bin shards.
//
// open_weight_files() returns the files of a model directory: the first of
// model.safetensors, the shards of model.safetensors.index.json, pytorch_model.bin
// (models/torch_bin.h) and the shards of pytorch_model.bin.index.json that exists, each
// file opened and validated as a single file is. The index is checked against the shards before any tensor is used: every shard
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
inline constexpr const char* kTorchWeightsFile = "pytorch_model.bin";
inline constexpr const char* kTorchShardIndexFile = "pytorch_model.bin.index.json";

// The file that holds or indexes the weights of `directory`, in that order of
// preference; model.safetensors when there is none, so that an error names it.
std::filesystem::path weights_entry_file(const std::filesystem::path& directory);

// Throws Error naming the file and the tensor at fault.
std::vector<SafetensorsFile> open_weight_files(const std::filesystem::path& directory);

}  // namespace ordo
