#include "tools/cli/bench/random_model.h"

#include <stdlib.h>  // mkdtemp

#include <fstream>
#include <string>

#include "engine/error.h"
#include "models/safetensors.h"
#include "tools/cli/bench/random_numbers.h"

namespace ordo::tools::bench {

namespace fs = std::filesystem;

std::vector<TensorSpec> random_model_tensors(const ModelConfig& config) {
  std::vector<TensorSpec> specs = expected_tensors(config);
  std::erase_if(specs, [](const TensorSpec& s) { return !s.required; });
  return specs;
}

void write_random_model(const fs::path& dir, const BenchShape& shape) {
  const fs::path config_path = dir / "config.json";
  std::ofstream config_file(config_path);
  config_file << shape.config.dump(2) << '\n';
  config_file.close();
  if (!config_file) throw Error(config_path.string(), "writing the random model's config failed", "is the disk full?");

  std::vector<GeneratedTensor> tensors;
  for (TensorSpec& spec : random_model_tensors(model_config(shape))) {
    auto fill = [name = spec.name](std::uint64_t first, std::span<float> out) { random_weights(name, first, out); };
    tensors.push_back({std::move(spec.name), std::move(spec.shape), std::move(fill)});
  }
  write_generated_safetensors_f32(dir / "model.safetensors", tensors);
}

namespace {

bool has_room(const fs::path& dir, std::uintmax_t bytes) {
  std::error_code error;
  const fs::space_info space = fs::space(dir, error);
  return !error && space.available >= bytes;
}

}  // namespace

ScratchModel::ScratchModel(const BenchShape& shape) {
  const fs::path parent = has_room("/dev/shm", std::uintmax_t{1} << 30) ? fs::path("/dev/shm") : fs::temp_directory_path();
  std::string pattern = (parent / "ordo-bench-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw Error(parent.string(), "cannot create a scratch directory for --shape", "is it writable?");
  dir_ = pattern;
  try {
    write_random_model(dir_, shape);
  } catch (...) {
    std::error_code ignored;  // a half-written model must not outlive the error
    fs::remove_all(dir_, ignored);
    throw;
  }
}

ScratchModel::~ScratchModel() {
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

}  // namespace ordo::tools::bench
