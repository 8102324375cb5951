// libFuzzer target: a sharded checkpoint, model.safetensors.index.json plus its shards.
// The input is the index, then each shard, separated by kFileSeparator lines; shard k
// of n is written as model-0000k-of-0000n.safetensors, as Hugging Face names them, so
// the seeds' indexes name real files and mutations can name missing, duplicate or
// escaping ones.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "models/shard_index.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = ordo::fuzz::split_files(ordo::fuzz::as_text(data, size));
  const std::filesystem::path& dir = ordo::fuzz::fresh_directory();
  ordo::fuzz::write_file(dir / ordo::kShardIndexFile, parts[0]);
  const std::size_t shards = parts.size() - 1;
  for (std::size_t k = 1; k < parts.size(); ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k, shards);
    ordo::fuzz::write_file(dir / name, parts[k]);
  }
  ordo::fuzz::refusal_is_fine([&] {
    const auto files = ordo::open_weight_files(dir);
    for (const ordo::SafetensorsFile& file : files)
      for (const ordo::TensorInfo& info : file.tensors())
        if (file.find(info.name) != &info) __builtin_trap();  // names are unique per file
  });
  return 0;
}
