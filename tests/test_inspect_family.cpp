// ordo inspect shows a model's config in its family's own keys: a LLaMA-family model's
// as Hugging Face spells them (hidden_size, hidden_act "silu", rms_norm_eps, ...), never
// ordo's internal names (d_model, "swish") or settings that do not apply to it
// (sinusoidal_layout). Oracle: the shipped german-llama's config.json itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "models/config.h"
#include "tests/cli_runner.h"

namespace ordo {
namespace {

using testing_support::run_ordo;

const std::filesystem::path kLlama = std::filesystem::path(ORDO_SOURCE_DIR) / "weights" / "german-llama";

TEST(InspectFamily, ALlamaModelsConfigIsShownInLlamaKeys) {
  const auto r = run_ordo("inspect --json --model german-llama");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json shown = nlohmann::json::parse(r.out)["config"];
  const nlohmann::json file = nlohmann::json::parse(std::ifstream(kLlama / "config.json"));
  for (const char* key : {"model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act",
                          "max_position_embeddings", "rms_norm_eps", "rope_theta", "attention_bias", "mlp_bias",
                          "tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id"}) {
    ASSERT_TRUE(shown.contains(key)) << key << " missing from " << shown.dump();
    EXPECT_EQ(shown[key], file[key]) << key;
  }
  for (const char* internal : {"d_model", "decoder_layers", "activation_function", "sinusoidal_layout",
                               "position_encoding", "encoder_layers", "layer_norm_eps", "relative_attention_num_buckets"})
    EXPECT_FALSE(shown.contains(internal)) << internal << " shown for a LLaMA model: " << shown.dump();

  const auto table = run_ordo("inspect --model german-llama");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("hidden_act"), std::string::npos);
  EXPECT_NE(table.out.find("\"silu\""), std::string::npos);
  EXPECT_EQ(table.out.find("swish"), std::string::npos);
}

// What inspect shows reads back as the same model.
TEST(InspectFamily, TheLlamaKeysReadBackToTheSameConfig) {
  const ModelConfig c = ModelConfig::load(kLlama / "config.json");
  const nlohmann::json shown = c.to_json();
  EXPECT_EQ(ModelConfig::from_json(shown, "shown").to_json(), shown);
  nlohmann::json several = shown;
  several["eos_token_id"] = {1, 2};
  const ModelConfig multi = ModelConfig::from_json(several, "several");
  EXPECT_EQ(multi.to_json()["eos_token_id"], nlohmann::json::array({1, 2}));
}

}  // namespace
}  // namespace ordo
