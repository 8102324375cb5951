#include "tools/cli/bench/random_model.h"

#include <stdlib.h>  // mkdtemp

#include <fstream>
#include <string>

#include <ordo/error.hpp>
#include <ordo/model_files.hpp>

#include "tools/cli/bench/random_numbers.h"

namespace ordo::tools::bench {

namespace fs = std::filesystem;

void write_random_model(const fs::path& dir, const BenchShape& shape) {
  const fs::path config_path = dir / "config.json";
  std::ofstream config_file(config_path);
  config_file << shape.config.dump(2) << '\n';
  config_file.close();
  if (!config_file) throw Error(config_path.string(), "writing the random model's config failed", "is the disk full?");

  write_safetensors(dir / "model.safetensors", model_layout(shape).tensors, random_weights);
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
