// Binding a safetensors file to a config: every mismatch is an error that names the
// tensor and both shapes; extra tensors are reported, never silently ignored.
#include <gtest/gtest.h>

#include <fstream>

#include "models/loaded_model.h"
#include "models/tensor_names.h"
#include "tests/model_factory.h"
#include "tests/reference.h"

namespace ordo {
namespace {

using testing_support::temp_dir;
using testing_support::tiny_config;
using testing_support::write_random_model;

std::string load_error(const nlohmann::json& config,
                       const std::function<void(std::vector<NamedTensor>&)>& edit) {
  const auto dir = temp_dir("weights");
  write_random_model(dir, config, 1, edit);
  return reference::error_message([&] { LoadedModel::load(dir, nullptr); });
}

void drop_tensor(std::vector<NamedTensor>& tensors, const std::string& name) {
  std::erase_if(tensors, [&](const NamedTensor& t) { return t.name == name; });
}

TEST(Weights, NameTableFollowsTheConfig) {
  auto config = tiny_config();
  config["share_encoder_decoder_embeddings"] = false;
  config["decoder_vocab_size"] = 19;
  config["tie_word_embeddings"] = false;
  config["position_encoding"] = "learned";
  config["position_offset"] = 2;
  config["normalize_before"] = true;
  const auto specs = expected_tensors(ModelConfig::from_json(config, "config.json"));
  const auto shape_of = [&](const std::string& name) -> Shape {
    for (const auto& s : specs)
      if (s.name == name) return s.shape;
    return {};
  };
  EXPECT_EQ(shape_of("model.encoder.embed_tokens.weight"), (Shape{23, 16}));
  EXPECT_EQ(shape_of("model.decoder.embed_tokens.weight"), (Shape{19, 16}));
  EXPECT_EQ(shape_of("lm_head.weight"), (Shape{19, 16}));
  EXPECT_EQ(shape_of("final_logits_bias"), (Shape{1, 19}));
  EXPECT_EQ(shape_of("model.decoder.embed_positions.weight"), (Shape{42, 16}));
  EXPECT_EQ(shape_of("model.encoder.layer_norm.weight"), (Shape{16}));
  EXPECT_EQ(shape_of("model.decoder.layers.1.encoder_attn.k_proj.weight"), (Shape{16, 16}));
  EXPECT_EQ(shape_of("model.encoder.layers.1.fc1.weight"), (Shape{24, 16}));
  EXPECT_TRUE(shape_of("model.shared.weight").empty());
  EXPECT_TRUE(shape_of("model.encoder.layers.2.fc1.weight").empty());
  // 2 embeddings + lm_head + bias + 2 position tables + 2 final norms x 2, 16 per encoder
  // layer, 26 per decoder layer.
  EXPECT_EQ(specs.size(), 2u + 1 + 1 + 2 + 4 + 2 * 16 + 2 * 26);
}

TEST(Weights, MissingTensorIsNamed) {
  const std::string message = load_error(tiny_config(), [](auto& tensors) {
    drop_tensor(tensors, "model.decoder.layers.1.fc2.bias");
  });
  EXPECT_NE(message.find("missing tensor 'model.decoder.layers.1.fc2.bias'"), std::string::npos) << message;
  EXPECT_NE(message.find("d_model=16"), std::string::npos) << message;
}

TEST(Weights, WrongShapeNamesTensorAndBothShapes) {
  const std::string message = load_error(tiny_config(), [](auto& tensors) {
    for (auto& t : tensors)
      if (t.name == "model.encoder.layers.0.fc1.weight") {
        t.shape = {12, 16};
        t.values.resize(12 * 16);
      }
  });
  EXPECT_NE(message.find("'model.encoder.layers.0.fc1.weight'"), std::string::npos) << message;
  EXPECT_NE(message.find("[12, 16]"), std::string::npos) << message;
  EXPECT_NE(message.find("encoder_ffn_dim=24"), std::string::npos) << message;
}

TEST(Weights, UnusedTensorIsWarnedAboutAndListed) {
  const auto dir = temp_dir("weights");
  write_random_model(dir, tiny_config(), 1, [](auto& tensors) {
    tensors.push_back({"model.encoder.embed_positions.weight", {40, 16}, std::vector<float>(640, 0.f)});
  });
  std::vector<std::string> warnings;
  const auto model = LoadedModel::load(dir, [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("model.encoder.embed_positions.weight"), std::string::npos);
  EXPECT_EQ(model->weights().unused(), std::vector<std::string>{"model.encoder.embed_positions.weight"});
}

TEST(Weights, ParameterCountCoversEveryBoundTensor) {
  const auto dir = temp_dir("weights");
  write_random_model(dir, tiny_config());
  const auto model = LoadedModel::load(dir, nullptr);
  Index expected = 0;  // the factory writes optional tensors (final_logits_bias) too
  for (const auto& spec : expected_tensors(model->config())) expected += element_count(spec.shape);
  EXPECT_EQ(model->weights().parameter_count(), expected);
}

TEST(Weights, ModelDirectoryErrors) {
  const auto empty = temp_dir("weights");
  EXPECT_NE(reference::error_message([&] { LoadedModel::load(empty / "nope", nullptr); }).find("not a model directory"),
            std::string::npos);
  EXPECT_NE(reference::error_message([&] { LoadedModel::load(empty, nullptr); }).find("config.json"), std::string::npos);

  const auto dir = temp_dir("weights");
  write_random_model(dir, tiny_config());
  std::ofstream(dir / "tokenizer.model") << "this is not a sentencepiece model";
  EXPECT_NE(reference::error_message([&] { LoadedModel::load(dir, nullptr); }).find("tokenizer.model"), std::string::npos);
}

TEST(Weights, NoTokenizerMeansIdsOnly) {
  const auto dir = temp_dir("weights");
  write_random_model(dir, tiny_config());
  const auto model = LoadedModel::load(dir, nullptr);
  EXPECT_FALSE(model->has_tokenizer());
  const std::string message = reference::error_message([&] { model->tokenize_source("cats"); });
  EXPECT_NE(message.find("--source-ids"), std::string::npos) << message;
}

}  // namespace
}  // namespace ordo
