// The weights of one model: its safetensors file (or shards, models/shard_index.h, or a
// pytorch_model.bin, models/torch_bin.h) checked against the family's tensor table.
//
// load() verifies, before anything is bound, that every required tensor is present
// with the expected shape and dtype. Weight matrices (linears, embeddings, the output
// head) stay as stored, memory-mapped: F32, F16, BF16, or int8 / int4 with their scales
// (models/stored_matrix.h); the config's compute_type, when set, converts them at load
// (models/quantize.h). Other tensors (norms, biases, position tables) are float32,
// converted from F16/BF16. Tensors the files have and the config does not use are kept
// in unused() so that callers can report them; they are never silently dropped.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "models/config.h"
#include "models/quantize.h"
#include "models/safetensors.h"
#include "models/stored_matrix.h"
#include "models/tensor_names.h"

namespace ordo {

class WeightStore {
 public:
  // The weights of the model directory `directory` (model.safetensors, or the shards
  // of model.safetensors.index.json).
  static WeightStore load(const std::filesystem::path& directory, const ModelConfig& config);

  WeightStore(WeightStore&&) = default;
  WeightStore& operator=(WeightStore&&) = default;
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // A tensor of the name table. Optional tensors the file lacks come back empty().
  // Asking for a name outside the table is a bug in ordo, reported as Error.
  TensorView get(const std::string& name) const;
  // A weight matrix of the name table (TensorSpec::matrix) in the format it runs in.
  // Optional ones the file lacks come back empty().
  WeightMatrix matrix(const std::string& name) const;
  // What the matrices run as: "f32", "int8 (a scale per row)", and with several formats
  // how many of each: "int4 (groups of 32): 15 matrices and int8 (a scale per row): 7
  // matrices" (int4's int8 fallback, Quantization::stored_as).
  std::string matrix_formats() const;
  // The bytes the weight matrices hold as they run (values and scales).
  std::size_t matrix_bytes() const;

  // One file, or the shards in the index's order of names.
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // "dir/model.safetensors", or "dir/model.safetensors.index.json" for shards.
  const std::string& source() const { return source_; }
  const std::vector<std::string>& unused() const { return unused_; }
  Index parameter_count() const { return parameter_count_; }

 private:
  WeightStore() = default;
  // `matrix`, bound from `values` and `scales`, as the config's compute_type asks
  // (converted into encoded_, the file's pages let go), or as stored (int4 arranged).
  WeightMatrix run_as(WeightMatrix matrix, const ModelConfig& config, const TensorSpec& spec, const StoredTensor& values,
                      const StoredTensor& scales);

  std::vector<SafetensorsFile> files_;
  std::string source_;
  std::map<std::string, TensorView> bound_;    // every expected non-matrix name; empty when absent
  std::map<std::string, WeightMatrix> matrices_;  // every expected matrix name; empty when absent
  std::vector<std::vector<float>> converted_;  // F16/BF16 data as float32 (stable buffers)
  MatrixCopies copies_;  // what matrices read instead of the files (models/stored_matrix.h)
  std::vector<EncodedMatrix> encoded_;  // matrices converted to the compute type
  std::vector<std::string> unused_;
  Index parameter_count_ = 0;
};

}  // namespace ordo
