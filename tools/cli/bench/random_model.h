// A shape's random model on disk (shapes.h): config.json, and model.safetensors with
// every tensor the config requires (ordo::model_layout), filled by random_weights
// (random_numbers.h). The tensors go through the library's writer (ordo/model_files.hpp)
// a chunk at a time: a whole base model is 240 MB (llama: 400 MB), which should not
// inflate the peak RSS the bench reports. tools/bench/make_bench_model.py writes the same values, so `--shape S` and
// `--model <the directory it writes>` run the same model.
#pragma once

#include <filesystem>
#include <vector>

#include "tools/cli/bench/shapes.h"

namespace ordo::tools::bench {

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
