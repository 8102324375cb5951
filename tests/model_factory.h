// Small random models on disk, for tests that need a whole model directory.
//
// The tensors come from the name table (expected_tensors) filled with seeded uniform
// noise; tests that check the *numbers* use the PyTorch oracle instead (test_parity).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/safetensors.h"

namespace ordo::testing_support {

// A minimal valid config: vocab 23, d_model 16, 2 heads, 2+2 layers, ffn 24,
// max_position_embeddings 40, pad 0, eos 1, decoder_start 0.
nlohmann::json tiny_config();

// Fresh empty directories under the system temp dir, unique per call, removed with
// everything in them when the TempDirs is destroyed (by the process that made them).
class TempDirs {
 public:
  TempDirs() = default;
  TempDirs(const TempDirs&) = delete;
  TempDirs& operator=(const TempDirs&) = delete;
  ~TempDirs();
  std::filesystem::path make(const std::string& tag);

 private:
  const pid_t owner_ = ::getpid();
  std::mutex mutex_;
  std::vector<std::filesystem::path> made_;
};

// A fresh empty directory under the system temp dir, unique per call, removed when the
// test process exits: CTest runs each test in a process of its own, and a suite run
// would otherwise leave hundreds of models in /tmp.
std::filesystem::path temp_dir(const std::string& tag);

// Writes config.json and model.safetensors (F32, uniform in [-scale, scale], layer
// norm weights around 1) into `dir`. `edit` may change the tensor list before writing
// (drop, reshape or add tensors) to produce broken files.
void write_random_model(const std::filesystem::path& dir, const nlohmann::json& config,
                        unsigned seed = 1,
                        const std::function<void(std::vector<NamedTensor>&)>& edit = {});

}  // namespace ordo::testing_support
