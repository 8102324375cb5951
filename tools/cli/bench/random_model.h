// A shape's random model on disk (shapes.h): config.json, and model.safetensors with
// every tensor the config requires, filled by random_weights (random_numbers.h). The
// tensors go through the library's safetensors writer a chunk at a time: a whole base
// model is 240 MB (llama: 400 MB), which should not inflate the peak RSS the bench
// reports. tools/bench/make_bench_model.py writes the same values, so `--shape S` and
// `--model <the directory it writes>` run the same model.
#pragma once

#include <filesystem>
#include <vector>

#include "models/config.h"
#include "models/tensor_names.h"
#include "tools/cli/bench/shapes.h"

namespace ordo::tools::bench {

// The tensors a random model of `config` holds, in file order: the required ones.
std::vector<TensorSpec> random_model_tensors(const ModelConfig& config);

// config.json and model.safetensors of `shape` into the existing directory `dir`.
void write_random_model(const std::filesystem::path& dir, const BenchShape& shape);

// A random model's directory that exists while this object does: RAM-backed /dev/shm
// when it has room, so "in memory" stays true and no disk is written; the system's temp
// directory otherwise.
class ScratchModel {
 public:
  explicit ScratchModel(const BenchShape& shape);
  ~ScratchModel();
  ScratchModel(const ScratchModel&) = delete;
  ScratchModel& operator=(const ScratchModel&) = delete;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace ordo::tools::bench
