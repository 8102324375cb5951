#include "models/m2m100_config.h"

#include "models/config_reader.h"

namespace ordo {

using namespace config_reader;

namespace {

// ACT2FN's names that ordo computes as transformers does (as for Marian); others
// (quick_gelu, gelu_fast, ...) are refused rather than run as another form.
constexpr EnumName<Activation> kM2M100Activations[] = {
    {"relu", Activation::Relu},
    {"gelu", Activation::Gelu},
    {"swish", Activation::Silu},
    {"silu", Activation::Silu},
    {"gelu_new", Activation::GeluTanh},
    {"gelu_pytorch_tanh", Activation::GeluTanh},
};

}  // namespace

ModelConfig m2m100_config(const nlohmann::json& object, const std::string& source) {
  const KeyReader keys(object, source, "an M2M100 config.json as save_pretrained writes it has every key");
  const Checks check(keys);
  ModelConfig c;

  if (!keys.boolean("is_encoder_decoder", true))
    keys.fail("is_encoder_decoder", "is false, and ordo runs M2M100 models as M2M100ForConditionalGeneration, an "
                                    "encoder-decoder");
  // M2M100Model ties both stacks' embed_tokens (and ForConditionalGeneration its lm_head)
  // to model.shared only with tied embeddings; untied, the file would hold four tables
  // of which transformers uses three. No published checkpoint does that.
  if (!keys.boolean("tie_word_embeddings", true))
    keys.fail("tie_word_embeddings", "is false, and ordo reads M2M100 checkpoints with tied embeddings only",
              "every published M2M100 and NLLB checkpoint ties them");
  // Training and generation settings: unused, but a wrong type means a broken file.
  for (const char* key : {"dropout", "attention_dropout", "activation_dropout", "encoder_layerdrop",
                          "decoder_layerdrop", "init_std"})
    (void)keys.real(key, 0.0);
  (void)keys.boolean("use_cache", true);
  if (const json* tokenizer_class = keys.find("tokenizer_class");
      tokenizer_class != nullptr && !tokenizer_class->is_null())
    (void)keys.string("tokenizer_class", "");

  c.vocab_size = keys.index("vocab_size", 128112);
  c.d_model = keys.index("d_model", 1024);
  c.encoder_layers = keys.index("encoder_layers", 12);
  c.decoder_layers = keys.index("decoder_layers", 12);
  c.encoder_attention_heads = keys.index("encoder_attention_heads", 16);
  c.decoder_attention_heads = keys.index("decoder_attention_heads", 16);
  c.encoder_ffn_dim = keys.index("encoder_ffn_dim", 4096);
  c.decoder_ffn_dim = keys.index("decoder_ffn_dim", 4096);
  c.max_position_embeddings = keys.index("max_position_embeddings", 1024);
  for (const auto& [key, value] :
       {std::pair{"vocab_size", c.vocab_size}, std::pair{"d_model", c.d_model},
        std::pair{"encoder_layers", c.encoder_layers}, std::pair{"decoder_layers", c.decoder_layers},
        std::pair{"encoder_attention_heads", c.encoder_attention_heads},
        std::pair{"decoder_attention_heads", c.decoder_attention_heads},
        std::pair{"encoder_ffn_dim", c.encoder_ffn_dim}, std::pair{"decoder_ffn_dim", c.decoder_ffn_dim},
        std::pair{"max_position_embeddings", c.max_position_embeddings}})
    check.positive(key, value);
  c.decoder_vocab_size = c.vocab_size;
  for (const auto& [key, heads] : {std::pair{"encoder_attention_heads", c.encoder_attention_heads},
                                   std::pair{"decoder_attention_heads", c.decoder_attention_heads}})
    if (c.d_model % heads != 0)
      keys.fail(key, "d_model=" + std::to_string(c.d_model) + " is not divisible by " + key + "=" +
                         std::to_string(heads),
                "each head gets d_model / heads dimensions");
  // tensor2tensor frequencies divide by d/2 - 1; an odd d_model would get a zero column
  // in transformers, which ordo does not compute.
  if (c.d_model % 2 != 0 || c.d_model < 4)
    keys.fail("d_model", "M2M100's sinusoidal positions need an even d_model of at least 4, got " +
                             std::to_string(c.d_model));

  c.activation_function = keys.enumeration("activation_function", kM2M100Activations, Activation::Relu);
  c.scale_embedding = keys.boolean("scale_embedding", true);

  c.pad_token_id = keys.optional_token_id("pad_token_id").value_or(1);
  c.bos_token_id = keys.optional_token_id("bos_token_id").value_or(0);
  c.eos_token_id = keys.optional_token_id("eos_token_id").value_or(2);
  c.decoder_start_token_id = keys.optional_token_id("decoder_start_token_id").value_or(2);
  check.token_in("pad_token_id", c.pad_token_id, "vocab_size", c.vocab_size);
  check.token_in("bos_token_id", *c.bos_token_id, "vocab_size", c.vocab_size);
  check.token_in("eos_token_id", c.eos_token_id, "vocab_size", c.vocab_size);
  check.token_in("decoder_start_token_id", c.decoder_start_token_id, "vocab_size", c.vocab_size);

  // The architecture the family fixes.
  c.num_key_value_heads = c.decoder_attention_heads;
  c.decoder_head_dim = c.d_model / c.decoder_attention_heads;
  c.normalize_before = true;
  c.layernorm_embedding = false;
  c.share_encoder_decoder_embeddings = true;
  c.tie_word_embeddings = true;
  c.position_encoding = PositionEncoding::Sinusoidal;
  c.sinusoidal_layout = SinusoidalLayout::Split;
  c.sinusoidal_frequencies = SinusoidalFrequencies::Tensor2Tensor;
  // M2M100SinusoidalPositionalEmbedding: the first non-pad token is at padding_idx + 1,
  // and pad tokens neither count nor get a vector.
  c.position_offset = static_cast<Index>(c.pad_token_id) + 1;
  c.positions_skip_pad = true;
  c.positions_bounded = false;
  c.layer_norm_eps = 1e-5;  // nn.LayerNorm's default; M2M100Config has no key for it
  c.norm_kind = NormKind::LayerNorm;
  c.feed_forward_kind = FeedForwardKind::Plain;
  c.attention_bias = true;
  c.mlp_bias = true;
  return c;
}

nlohmann::json m2m100_config_json(const ModelConfig& c) {
  json j = json::object();
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["d_model"] = c.d_model;
  j["encoder_layers"] = c.encoder_layers;
  j["decoder_layers"] = c.decoder_layers;
  j["encoder_attention_heads"] = c.encoder_attention_heads;
  j["decoder_attention_heads"] = c.decoder_attention_heads;
  j["encoder_ffn_dim"] = c.encoder_ffn_dim;
  j["decoder_ffn_dim"] = c.decoder_ffn_dim;
  j["activation_function"] = std::string(name_of(kM2M100Activations, c.activation_function));
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["scale_embedding"] = c.scale_embedding;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["pad_token_id"] = c.pad_token_id;
  j["bos_token_id"] = c.bos_token_id ? json(*c.bos_token_id) : json(nullptr);
  j["eos_token_id"] = c.eos_token_id;
  j["decoder_start_token_id"] = c.decoder_start_token_id;
  j["is_encoder_decoder"] = true;
  return j;
}

}  // namespace ordo
