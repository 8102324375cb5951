#include "models/marian_config.h"

#include "models/config_reader.h"

namespace ordo {

using namespace config_reader;

namespace {

// ACT2FN's names that ordo computes as transformers does. Other approximations
// (gelu_fast, quick_gelu, ...) are left out on purpose: running them as another form
// would change the numbers silently.
constexpr EnumName<Activation> kMarianActivations[] = {
    {"swish", Activation::Silu},
    {"silu", Activation::Silu},
    {"gelu", Activation::Gelu},
    {"relu", Activation::Relu},
    {"gelu_new", Activation::GeluTanh},
    {"gelu_pytorch_tanh", Activation::GeluTanh},
};

// MarianConfig's defaults (transformers' configuration_marian.py).
constexpr Index kDefaultVocab = 58101;
constexpr Index kDefaultPad = 58100;

}  // namespace

ModelConfig marian_config(const nlohmann::json& object, const std::string& source) {
  const KeyReader keys(object, source, "a Marian config.json as save_pretrained writes it has every key");
  const Checks check(keys);
  ModelConfig c;

  if (!keys.boolean("is_encoder_decoder", true))
    keys.fail("is_encoder_decoder", "is false, and ordo runs Marian models as MarianMTModel, an encoder-decoder",
              "a MarianForCausalLM checkpoint is not supported; set it to true only if the encoder is in the file");
  // Training and generation settings: unused, but a wrong type means a broken file.
  for (const char* key : {"dropout", "attention_dropout", "activation_dropout", "encoder_layerdrop",
                          "decoder_layerdrop", "init_std"})
    (void)keys.real(key, 0.0);
  (void)keys.boolean("use_cache", true);
  (void)keys.optional_token_id("forced_eos_token_id");

  c.vocab_size = keys.index("vocab_size", kDefaultVocab);
  check.positive("vocab_size", c.vocab_size);
  const json* decoder_vocab = keys.find("decoder_vocab_size");
  c.decoder_vocab_size = decoder_vocab == nullptr || decoder_vocab->is_null()
                             ? c.vocab_size
                             : keys.integer("decoder_vocab_size", *decoder_vocab);
  // MarianMTModel's decoder embedding has vocab_size rows whatever decoder_vocab_size
  // says (it is a copy of the shared one), and every published checkpoint has one size.
  if (c.decoder_vocab_size != c.vocab_size)
    keys.fail("decoder_vocab_size",
              std::to_string(c.decoder_vocab_size) + " differs from vocab_size=" + std::to_string(c.vocab_size),
              "MarianMTModel's decoder embedding has vocab_size rows; published opus-mt models use one size");

  c.d_model = keys.index("d_model", 1024);
  c.encoder_layers = keys.index("encoder_layers", 12);
  c.decoder_layers = keys.index("decoder_layers", 12);
  c.encoder_attention_heads = keys.index("encoder_attention_heads", 16);
  c.decoder_attention_heads = keys.index("decoder_attention_heads", 16);
  c.encoder_ffn_dim = keys.index("encoder_ffn_dim", 4096);
  c.decoder_ffn_dim = keys.index("decoder_ffn_dim", 4096);
  c.max_position_embeddings = keys.index("max_position_embeddings", 1024);
  check.positive("d_model", c.d_model);
  check.positive("encoder_layers", c.encoder_layers);
  check.positive("decoder_layers", c.decoder_layers);
  check.positive("encoder_attention_heads", c.encoder_attention_heads);
  check.positive("decoder_attention_heads", c.decoder_attention_heads);
  check.positive("encoder_ffn_dim", c.encoder_ffn_dim);
  check.positive("decoder_ffn_dim", c.decoder_ffn_dim);
  check.positive("max_position_embeddings", c.max_position_embeddings);
  for (const auto& [key, heads] : {std::pair{"encoder_attention_heads", c.encoder_attention_heads},
                                   std::pair{"decoder_attention_heads", c.decoder_attention_heads}})
    if (c.d_model % heads != 0)
      keys.fail(key, "d_model=" + std::to_string(c.d_model) + " is not divisible by " + key + "=" +
                         std::to_string(heads),
                "each head gets d_model / heads dimensions");
  if (c.d_model % 2 != 0)
    keys.fail("d_model", "Marian's sinusoidal positions need an even d_model, got " + std::to_string(c.d_model));

  c.activation_function = keys.enumeration("activation_function", kMarianActivations, Activation::Gelu);
  c.scale_embedding = keys.boolean("scale_embedding", false);
  c.share_encoder_decoder_embeddings = keys.boolean("share_encoder_decoder_embeddings", true);
  c.tie_word_embeddings = keys.boolean("tie_word_embeddings", true);

  c.pad_token_id = keys.optional_token_id("pad_token_id").value_or(static_cast<int>(kDefaultPad));
  c.eos_token_id = keys.optional_token_id("eos_token_id").value_or(0);
  c.decoder_start_token_id = keys.optional_token_id("decoder_start_token_id").value_or(static_cast<int>(kDefaultPad));
  c.bos_token_id = keys.optional_token_id("bos_token_id");
  check.token_in("pad_token_id", c.pad_token_id, "vocab_size", c.vocab_size);
  check.token_in("eos_token_id", c.eos_token_id, "vocab_size", c.vocab_size);
  check.token_in("decoder_start_token_id", c.decoder_start_token_id, "vocab_size", c.vocab_size);
  if (c.bos_token_id) check.token_in("bos_token_id", *c.bos_token_id, "vocab_size", c.vocab_size);

  // The architecture the family fixes.
  c.num_key_value_heads = c.decoder_attention_heads;
  c.decoder_head_dim = c.d_model / c.decoder_attention_heads;
  c.normalize_before = false;
  c.layernorm_embedding = false;
  c.position_encoding = PositionEncoding::Sinusoidal;
  c.sinusoidal_layout = SinusoidalLayout::Split;
  c.sinusoidal_frequencies = SinusoidalFrequencies::Vaswani;
  c.position_offset = 0;
  c.positions_bounded = true;
  c.layer_norm_eps = 1e-5;  // nn.LayerNorm's default; MarianConfig has no key for it
  c.norm_kind = NormKind::LayerNorm;
  c.feed_forward_kind = FeedForwardKind::Plain;
  c.attention_bias = true;
  c.mlp_bias = true;
  return c;
}

nlohmann::json marian_config_json(const ModelConfig& c) {
  json j = json::object();
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["decoder_vocab_size"] = c.decoder_vocab_size;
  j["d_model"] = c.d_model;
  j["encoder_layers"] = c.encoder_layers;
  j["decoder_layers"] = c.decoder_layers;
  j["encoder_attention_heads"] = c.encoder_attention_heads;
  j["decoder_attention_heads"] = c.decoder_attention_heads;
  j["encoder_ffn_dim"] = c.encoder_ffn_dim;
  j["decoder_ffn_dim"] = c.decoder_ffn_dim;
  j["activation_function"] = std::string(name_of(kMarianActivations, c.activation_function));
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["scale_embedding"] = c.scale_embedding;
  j["share_encoder_decoder_embeddings"] = c.share_encoder_decoder_embeddings;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["pad_token_id"] = c.pad_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["decoder_start_token_id"] = c.decoder_start_token_id;
  j["bos_token_id"] = c.bos_token_id ? json(*c.bos_token_id) : json(nullptr);
  j["is_encoder_decoder"] = true;
  return j;
}

}  // namespace ordo
