#include "tools/cli/bench/random_numbers.h"

namespace ordo::tools::bench {

namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr std::uint64_t kSourceSeed = 0x6F72646F62656E63ull;  // "ordobenc"

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::uint64_t splitmix64(std::uint64_t seed, std::uint64_t j) { return mix(seed + (j + 1) * kGolden); }

std::uint64_t fnv1a64(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

std::vector<int> random_sources(int batch, int length, int vocab) {
  const std::uint64_t low = vocab > 3 ? 3 : 0;
  std::vector<int> ids(static_cast<std::size_t>(batch) * static_cast<std::size_t>(length));
  for (std::size_t j = 0; j < ids.size(); ++j)
    ids[j] = static_cast<int>(low + splitmix64(kSourceSeed, j) % (static_cast<std::uint64_t>(vocab) - low));
  return ids;
}

bool is_norm_weight(std::string_view name) {
  return name.ends_with("norm.weight") || name.ends_with("layernorm_embedding.weight");
}

void random_weights(const std::string& name, std::uint64_t first, std::span<float> out) {
  const std::uint64_t seed = fnv1a64(name);
  const double one = is_norm_weight(name) ? 1.0 : 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double u = static_cast<double>(splitmix64(seed, first + i) >> 40) * 0x1p-24;
    out[i] = static_cast<float>(one + (2.0 * u - 1.0) * 0.05);
  }
}

}  // namespace ordo::tools::bench
