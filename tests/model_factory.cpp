#include "tests/model_factory.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <random>
#include <system_error>

#include "models/config.h"
#include "models/tensor_names.h"

namespace ordo::testing_support {

nlohmann::json tiny_config() {
  return {{"vocab_size", 23},
          {"d_model", 16},
          {"encoder_layers", 2},
          {"decoder_layers", 2},
          {"encoder_attention_heads", 2},
          {"decoder_attention_heads", 2},
          {"encoder_ffn_dim", 24},
          {"decoder_ffn_dim", 24},
          {"max_position_embeddings", 40},
          {"pad_token_id", 0},
          {"eos_token_id", 1},
          {"decoder_start_token_id", 0}};
}

TempDirs::~TempDirs() {
  // Only the process that made them: a forked child that exits normally must not take
  // its parent's directories with it.
  if (::getpid() != owner_) return;
  for (const std::filesystem::path& dir : made_) {
    std::error_code ignored;  // a test may have removed its own already
    std::filesystem::remove_all(dir, ignored);
  }
}

std::filesystem::path TempDirs::make(const std::string& tag) {
  static std::atomic<int> counter{0};
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ordo_test_" + tag + "_" + std::to_string(::getpid()) + "_" +
                    std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::lock_guard lock(mutex_);
  made_.push_back(dir);
  return dir;
}

std::filesystem::path temp_dir(const std::string& tag) {
  // Destroyed when the test process exits, after every test in it has run.
  static TempDirs dirs;
  return dirs.make(tag);
}

void write_random_model(const std::filesystem::path& dir, const nlohmann::json& config,
                        unsigned seed,
                        const std::function<void(std::vector<NamedTensor>&)>& edit) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump(2);
  const ModelConfig parsed = ModelConfig::from_json(config, "config.json");

  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> noise(-0.5f, 0.5f);
  std::vector<NamedTensor> tensors;
  for (const TensorSpec& spec : expected_tensors(parsed)) {
    NamedTensor tensor{spec.name, spec.shape, std::vector<float>(static_cast<std::size_t>(element_count(spec.shape)))};
    const bool norm_weight = spec.name.ends_with("norm.weight") || spec.name.ends_with("layernorm_embedding.weight");
    for (float& x : tensor.values) x = (norm_weight ? 1.0f : 0.0f) + noise(rng);
    tensors.push_back(std::move(tensor));
  }
  if (edit) edit(tensors);
  write_safetensors_f32(dir / "model.safetensors", tensors);
}

}  // namespace ordo::testing_support
