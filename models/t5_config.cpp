#include "models/t5_config.h"

#include "engine/limits.h"
#include "models/config_reader.h"

namespace ordo {

using namespace config_reader;

namespace {

// ACT2FN's names that ordo computes as transformers does (as for Marian): other
// approximations (gelu_fast, quick_gelu, ...) would change the numbers silently.
constexpr EnumName<Activation> kT5Activations[] = {
    {"relu", Activation::Relu},         {"gelu", Activation::Gelu},
    {"gelu_new", Activation::GeluTanh}, {"gelu_pytorch_tanh", Activation::GeluTanh},
    {"silu", Activation::Silu},         {"swish", Activation::Silu},
};

struct FeedForwardProjection {
  FeedForwardKind kind;
  Activation activation;
  std::string dense_act_fn;  // the ACT2FN name T5Config derives
};

// T5Config's reading of feed_forward_proj: "ACT" or "gated-ACT", and "gated-gelu" means
// gelu_new (the tanh form T5 v1.1 was trained with).
FeedForwardProjection feed_forward_projection(const KeyReader& keys, const std::string& value) {
  const bool gated = value.starts_with("gated-");
  std::string act = gated ? value.substr(6) : value;
  if (value == "gated-gelu") act = "gelu_new";
  for (const auto& entry : kT5Activations)
    if (entry.name == act) return {gated ? FeedForwardKind::Gated : FeedForwardKind::Plain, entry.value, act};
  std::vector<std::string_view> names;
  for (const auto& entry : kT5Activations) names.push_back(entry.name);
  keys.fail("feed_forward_proj", "unknown value " + json_excerpt(json(value)),
            "expected relu, gated-gelu, or ACT or gated-ACT with ACT one of: " + join(names));
}

std::string feed_forward_proj_name(const ModelConfig& c) {
  const bool gated = c.feed_forward_kind == FeedForwardKind::Gated;
  if (gated && c.activation_function == Activation::GeluTanh) return "gated-gelu";
  const std::string act(name_of(kT5Activations, c.activation_function));
  return gated ? "gated-" + act : act;
}

}  // namespace

ModelConfig t5_config(const nlohmann::json& object, const std::string& source, const std::string& model_type) {
  const bool mt5 = model_type == "mt5";
  const KeyReader keys(object, source, "a T5 config.json as save_pretrained writes it has every key");
  const Checks check(keys);
  ModelConfig c;

  if (!keys.boolean("is_encoder_decoder", true))
    keys.fail("is_encoder_decoder", "is false, and ordo runs T5 models as T5ForConditionalGeneration, an encoder-decoder",
              "a T5EncoderModel checkpoint has no decoder to translate with");
  // Training settings: unused, but a wrong type means a broken file.
  for (const char* key : {"dropout_rate", "classifier_dropout", "initializer_factor"}) (void)keys.real(key, 0.0);
  (void)keys.boolean("use_cache", true);

  c.vocab_size = keys.index("vocab_size", mt5 ? 250112 : 32128);
  c.decoder_vocab_size = c.vocab_size;
  c.d_model = keys.index("d_model", 512);
  const Index d_kv = keys.index("d_kv", 64);
  const Index d_ff = keys.index("d_ff", mt5 ? 1024 : 2048);
  c.encoder_layers = keys.index("num_layers", mt5 ? 8 : 6);
  const json* decoder_layers = keys.find("num_decoder_layers");
  c.decoder_layers = decoder_layers == nullptr || decoder_layers->is_null()
                         ? c.encoder_layers
                         : keys.integer("num_decoder_layers", *decoder_layers);
  const Index heads = keys.index("num_heads", mt5 ? 6 : 8);
  c.relative_attention_num_buckets = keys.index("relative_attention_num_buckets", 32);
  c.relative_attention_max_distance = keys.index("relative_attention_max_distance", 128);
  c.layer_norm_eps = keys.real("layer_norm_epsilon", 1e-6);
  check.positive("vocab_size", c.vocab_size);
  check.positive("d_model", c.d_model);
  check.positive("d_kv", d_kv);
  check.positive("d_ff", d_ff);
  check.positive("num_layers", c.encoder_layers);
  check.positive("num_decoder_layers", c.decoder_layers);
  check.positive("num_heads", heads);
  check.at_most_max_size("num_heads x d_kv", heads * d_kv);
  check.epsilon("layer_norm_epsilon", c.layer_norm_eps);
  // T5's bucket function halves a side's buckets and takes log(max_distance / exact).
  check.at_most_max_size("relative_attention_num_buckets", c.relative_attention_num_buckets);
  check.at_most_max_size("relative_attention_max_distance", c.relative_attention_max_distance);
  if (c.relative_attention_num_buckets < 4)
    keys.fail("relative_attention_num_buckets",
              "needs at least 4 buckets, got " + std::to_string(c.relative_attention_num_buckets), "T5 uses 32");
  if (c.relative_attention_max_distance <= c.relative_attention_num_buckets / 2)
    keys.fail("relative_attention_max_distance",
              "must be more than relative_attention_num_buckets / 2 = " +
                  std::to_string(c.relative_attention_num_buckets / 2) + ", got " +
                  std::to_string(c.relative_attention_max_distance),
              "T5 uses 128 with 32 buckets");

  const FeedForwardProjection ffn =
      feed_forward_projection(keys, keys.string("feed_forward_proj", mt5 ? "gated-gelu" : "relu"));
  // save_pretrained writes what T5Config derived; a file where they disagree was edited.
  if (const std::string act = keys.string("dense_act_fn", ffn.dense_act_fn); act != ffn.dense_act_fn)
    keys.fail("dense_act_fn", "is " + json_excerpt(json(act)) + ", but feed_forward_proj says " + ffn.dense_act_fn,
              "T5Config derives it from feed_forward_proj; make the two agree");
  if (const bool gated = keys.boolean("is_gated_act", ffn.kind == FeedForwardKind::Gated);
      gated != (ffn.kind == FeedForwardKind::Gated))
    keys.fail("is_gated_act", std::string("is ") + (gated ? "true" : "false") + ", but feed_forward_proj says " +
                                  (gated ? "not gated" : "gated"),
              "T5Config derives it from feed_forward_proj; make the two agree");

  c.tie_word_embeddings = keys.boolean("tie_word_embeddings", !mt5);
  c.pad_token_id = keys.optional_token_id("pad_token_id").value_or(0);
  c.eos_token_id = keys.optional_token_id("eos_token_id").value_or(1);
  c.decoder_start_token_id = keys.optional_token_id("decoder_start_token_id").value_or(c.pad_token_id);
  check.token_in("pad_token_id", c.pad_token_id, "vocab_size", c.vocab_size);
  check.token_in("eos_token_id", c.eos_token_id, "vocab_size", c.vocab_size);
  check.token_in("decoder_start_token_id", c.decoder_start_token_id, "vocab_size", c.vocab_size);

  // The architecture the family fixes.
  c.encoder_attention_heads = c.decoder_attention_heads = c.num_key_value_heads = heads;
  c.encoder_head_width = c.decoder_head_dim = d_kv;
  c.encoder_ffn_dim = c.decoder_ffn_dim = d_ff;
  c.feed_forward_kind = ffn.kind;
  c.activation_function = ffn.activation;
  c.normalize_before = true;
  c.norm_kind = NormKind::RmsNorm;
  c.attention_bias = false;
  c.mlp_bias = false;
  c.attention_scaling = ScoreScaling::None;
  c.scale_tied_head = c.tie_word_embeddings;
  c.share_encoder_decoder_embeddings = true;
  c.scale_embedding = false;
  c.layernorm_embedding = false;
  c.position_encoding = PositionEncoding::T5Relative;
  // Relative positions bound no length: ordo's own limit does.
  c.max_position_embeddings = kMaxSequenceLength;
  return c;
}

nlohmann::json t5_config_json(const ModelConfig& c) {
  json j = json::object();
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["d_model"] = c.d_model;
  j["d_kv"] = c.decoder_head_dim;
  j["d_ff"] = c.decoder_ffn_dim;
  j["num_layers"] = c.encoder_layers;
  j["num_decoder_layers"] = c.decoder_layers;
  j["num_heads"] = c.decoder_attention_heads;
  j["relative_attention_num_buckets"] = c.relative_attention_num_buckets;
  j["relative_attention_max_distance"] = c.relative_attention_max_distance;
  j["layer_norm_epsilon"] = c.layer_norm_eps;
  j["feed_forward_proj"] = feed_forward_proj_name(c);
  j["dense_act_fn"] = std::string(c.feed_forward_kind == FeedForwardKind::Gated &&
                                          c.activation_function == Activation::GeluTanh
                                      ? "gelu_new"
                                      : name_of(kT5Activations, c.activation_function));
  j["is_gated_act"] = c.feed_forward_kind == FeedForwardKind::Gated;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["pad_token_id"] = c.pad_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["decoder_start_token_id"] = c.decoder_start_token_id;
  j["is_encoder_decoder"] = true;
  return j;
}

}  // namespace ordo
