// model_layout and write_safetensors: the family tables and the safetensors writer of
// models/, for programs that make model directories.
#include "ordo/model_files.hpp"

#include "models/config.h"
#include "models/safetensors.h"
#include "models/tensor_names.h"

namespace ordo {

ModelLayout model_layout(std::string_view config_json, const std::string& source) {
  const ModelConfig c = ModelConfig::parse(config_json, source);
  ModelLayout layout;
  layout.family = c.model_type;
  layout.decoder_only = !c.has_encoder();
  layout.d_model = static_cast<int>(c.d_model);
  layout.encoder_layers = c.has_encoder() ? static_cast<int>(c.encoder_layers) : 0;
  layout.decoder_layers = static_cast<int>(c.decoder_layers);
  layout.attention_heads = static_cast<int>(c.decoder_attention_heads);
  layout.key_value_heads = static_cast<int>(c.num_key_value_heads);
  layout.ffn_dim = static_cast<int>(c.decoder_ffn_dim);
  layout.gated_ffn = c.feed_forward_kind == FeedForwardKind::Gated;
  layout.vocabulary_size = static_cast<int>(c.vocab_size);
  for (const TensorSpec& spec : expected_tensors(c)) {
    if (!spec.required) continue;
    layout.parameters += element_count(spec.shape);
    layout.tensors.push_back({spec.name, {spec.shape.begin(), spec.shape.end()}});
  }
  return layout;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorShape>& tensors,
                       const TensorFill& fill) {
  std::vector<GeneratedTensor> generated;
  generated.reserve(tensors.size());
  for (const TensorShape& t : tensors)
    generated.push_back({t.name, Shape(t.shape.begin(), t.shape.end()),
                         [&fill, name = t.name](std::uint64_t first, std::span<float> out) { fill(name, first, out); }});
  write_generated_safetensors_f32(path, generated);
}

}  // namespace ordo
