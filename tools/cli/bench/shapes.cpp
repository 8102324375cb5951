#include "tools/cli/bench/shapes.h"

#include <iomanip>
#include <ostream>
#include <sstream>

#include "tools/cli/bench/random_model.h"

namespace ordo::tools::bench {

namespace {

// Marian's transformer-base as Hugging Face's opus-mt models configure it (swish,
// scaled embeddings, split sinusoids, tied shared embeddings, post-norm), with a
// 32000-piece vocabulary.
nlohmann::json base_config() {
  return {{"model_type", "ordo"},
          {"vocab_size", 32000},
          {"d_model", 512},
          {"encoder_layers", 6},
          {"decoder_layers", 6},
          {"encoder_attention_heads", 8},
          {"decoder_attention_heads", 8},
          {"encoder_ffn_dim", 2048},
          {"decoder_ffn_dim", 2048},
          {"activation_function", "swish"},
          {"normalize_before", false},
          {"scale_embedding", true},
          {"max_position_embeddings", 512},
          {"position_encoding", "sinusoidal"},
          {"sinusoidal_layout", "split"},
          {"share_encoder_decoder_embeddings", true},
          {"tie_word_embeddings", true},
          {"pad_token_id", 31999},
          {"eos_token_id", 0},
          {"decoder_start_token_id", 31999}};
}

// A LLaMA-layout decoder of 99,496,704 parameters in Hugging Face's config keys:
// hidden 768, 8 layers, 12 query heads sharing 4 K/V heads (head_dim 64), SwiGLU 2048,
// a 32000-piece vocabulary with an untied lm_head (2 x 24.6 M), RMSNorm, RoPE.
nlohmann::json llama_config() {
  return {{"model_type", "llama"},
          {"vocab_size", 32000},
          {"hidden_size", 768},
          {"intermediate_size", 2048},
          {"num_hidden_layers", 8},
          {"num_attention_heads", 12},
          {"num_key_value_heads", 4},
          {"hidden_act", "silu"},
          {"max_position_embeddings", 2048},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"tie_word_embeddings", false},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"torch_dtype", "float32"}};
}

// "d 512, 6+6 layers, 8 heads, FFN 2048, vocab 32000", from the config as ordo reads it,
// so that the listing cannot say other than what the shape builds.
std::string dimensions(const ModelLayout& m) {
  std::ostringstream s;
  s << "d " << m.d_model << ", ";
  if (!m.decoder_only) s << m.encoder_layers << '+';
  s << m.decoder_layers << " layers, " << m.attention_heads << " heads";
  if (m.key_value_heads != m.attention_heads) s << " over " << m.key_value_heads << " K/V heads";
  s << (m.gated_ffn ? ", gated FFN " : ", FFN ") << m.ffn_dim << ", vocab " << m.vocabulary_size;
  return s.str();
}

}  // namespace

const std::vector<BenchShape>& bench_shapes() {
  static const std::vector<BenchShape> shapes = {
      {"base", "Marian's transformer-base, as opus-mt has it: swish, post-norm, tied embeddings", base_config()},
      {"llama", "Hugging Face's LLaMA layout: RMSNorm, SwiGLU, RoPE, untied lm_head", llama_config()},
  };
  return shapes;
}

const BenchShape* find_bench_shape(std::string_view name) {
  for (const BenchShape& shape : bench_shapes())
    if (shape.name == name) return &shape;
  return nullptr;
}

std::string bench_shape_names(std::string_view separator) {
  std::string names;
  for (const BenchShape& shape : bench_shapes()) names += (names.empty() ? "" : std::string(separator)) + shape.name;
  return names;
}

ModelLayout model_layout(const BenchShape& shape) { return ordo::model_layout(shape.config.dump(), "--shape " + shape.name); }

std::string with_thousands(std::int64_t count) {
  const std::string digits = std::to_string(count < 0 ? -count : count);
  std::string text = count < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) text += ',';
    text += digits[i];
  }
  return text;
}

nlohmann::json describe_shape(const BenchShape& shape) {
  const ModelLayout layout = model_layout(shape);
  return {{"name", shape.name},
          {"kind", layout.decoder_only ? "decoder-only" : "encoder-decoder"},
          {"parameters", layout.parameters},
          {"summary", shape.summary},
          {"config", shape.config}};
}

void print_shapes_table(std::ostream& out) {
  out << "ordo bench --shape NAME: a random model built in memory (--list-shapes --json prints each\n"
         "one's config.json)\n\n";
  out << "  " << std::left << std::setw(8) << "name" << std::setw(17) << "kind" << std::right << std::setw(12)
      << "parameters" << "   dimensions\n";
  for (const BenchShape& shape : bench_shapes()) {
    const ModelLayout layout = model_layout(shape);
    out << "  " << std::left << std::setw(8) << shape.name << std::setw(17)
        << (layout.decoder_only ? "decoder-only" : "encoder-decoder") << std::right << std::setw(12)
        << with_thousands(layout.parameters) << "   " << dimensions(layout) << '\n'
        << "  " << std::string(8 + 17 + 12 + 3, ' ') << shape.summary << '\n';
  }
}

}  // namespace ordo::tools::bench
