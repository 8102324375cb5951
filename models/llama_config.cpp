#include "models/llama_config.h"

#include <set>

#include "models/config_reader.h"
#include "models/rope_scaling_config.h"

namespace ordo {

using namespace config_reader;

ModelConfig llama_config(const nlohmann::json& object, const std::string& source) {
  const KeyReader keys(object, source, "every LLaMA config.json sets it (see models/llama_config.h)");
  const Checks check(keys);
  ModelConfig c;

  // What ordo does not implement is refused by name, never silently approximated.
  const std::string act = keys.string("hidden_act", "silu");
  if (act != "silu")
    keys.fail("hidden_act", "unsupported activation " + json_excerpt(act), "LLaMA models use \"silu\" (SwiGLU)");
  (void)keys.string("torch_dtype", "");  // informational, but a string if present

  c.vocab_size = keys.index("vocab_size");
  c.decoder_vocab_size = c.vocab_size;
  c.d_model = keys.index("hidden_size");
  c.decoder_ffn_dim = keys.index("intermediate_size");
  c.decoder_layers = keys.index("num_hidden_layers");
  c.decoder_attention_heads = keys.index("num_attention_heads");
  check.positive("vocab_size", c.vocab_size);
  check.positive("hidden_size", c.d_model);
  check.positive("intermediate_size", c.decoder_ffn_dim);
  check.non_negative("num_hidden_layers", c.decoder_layers);
  check.positive("num_attention_heads", c.decoder_attention_heads);
  c.num_key_value_heads = keys.index("num_key_value_heads", c.decoder_attention_heads);
  check.positive("num_key_value_heads", c.num_key_value_heads);
  if (c.decoder_attention_heads % c.num_key_value_heads != 0)
    keys.fail("num_key_value_heads",
              "num_attention_heads=" + std::to_string(c.decoder_attention_heads) +
                  " is not divisible by num_key_value_heads=" + std::to_string(c.num_key_value_heads),
              "each K/V head serves the same number of query heads");
  const json* head_dim = keys.find("head_dim");
  if (head_dim == nullptr || head_dim->is_null()) {
    if (c.d_model % c.decoder_attention_heads != 0)
      keys.fail("num_attention_heads",
                "hidden_size=" + std::to_string(c.d_model) + " is not divisible by num_attention_heads=" +
                    std::to_string(c.decoder_attention_heads),
                "or give head_dim explicitly");
    c.decoder_head_dim = c.d_model / c.decoder_attention_heads;
  } else {
    c.decoder_head_dim = keys.integer("head_dim", *head_dim);
    check.positive("head_dim", c.decoder_head_dim);
    check.at_most_max_size("head_dim x num_attention_heads", c.decoder_head_dim * c.decoder_attention_heads);
  }
  if (c.decoder_head_dim % 2 != 0)
    keys.fail("head_dim", "RoPE needs an even head dimension, got " + std::to_string(c.decoder_head_dim));

  c.layer_norm_eps = keys.real("rms_norm_eps", 1e-6);
  check.epsilon("rms_norm_eps", c.layer_norm_eps);
  c.rope_theta = keys.real("rope_theta", 10000.0);
  check.finite_positive("rope_theta", c.rope_theta);
  c.max_position_embeddings = keys.index("max_position_embeddings", 2048);
  check.positive("max_position_embeddings", c.max_position_embeddings);
  c.tie_word_embeddings = keys.boolean("tie_word_embeddings", false);
  c.attention_bias = keys.boolean("attention_bias", false);
  c.mlp_bias = keys.boolean("mlp_bias", false);

  // Token ids: eos may be a list (LLaMA 3 ends on several); the first is the primary.
  const json& eos = keys.require("eos_token_id");
  if (eos.is_array()) {
    if (eos.empty()) keys.fail("eos_token_id", "is an empty list", "give at least one id");
    std::vector<int> ids;
    std::set<Index> seen;
    for (const json& id : eos) {
      const Index value = keys.integer("eos_token_id", id);
      if (value < 0 || value >= c.vocab_size)
        keys.fail("eos_token_id", "token id " + std::to_string(value) + " is outside [0, vocab_size=" +
                                      std::to_string(c.vocab_size) + ")");
      // Each id once: the list is searched for every candidate token, so it must not
      // be longer than the vocabulary it indexes.
      if (!seen.insert(value).second)
        keys.fail("eos_token_id", "token id " + std::to_string(value) + " is listed twice");
      ids.push_back(static_cast<int>(value));
    }
    c.eos_token_id = ids.front();
    c.other_eos_token_ids.assign(ids.begin() + 1, ids.end());
  } else {
    c.eos_token_id = keys.token_id("eos_token_id");
    check.token_in("eos_token_id", c.eos_token_id, "vocab_size", c.vocab_size);
  }
  c.bos_token_id = keys.optional_token_id("bos_token_id");
  if (c.bos_token_id) check.token_in("bos_token_id", *c.bos_token_id, "vocab_size", c.vocab_size);
  // Padding rows are never read: any valid id serves; LLaMA configs often have none.
  c.pad_token_id = keys.optional_token_id("pad_token_id").value_or(c.eos_token_id);
  check.token_in("pad_token_id", c.pad_token_id, "vocab_size", c.vocab_size);
  c.decoder_start_token_id = c.bos_token_id.value_or(c.eos_token_id);  // unused: no encoder

  // The architecture the family fixes.
  c.encoder_layers = 0;
  c.activation_function = Activation::Silu;
  c.normalize_before = true;
  c.position_encoding = PositionEncoding::Rope;
  c.rope_layout = RopeLayout::Half;
  c.position_offset = 0;
  c.share_encoder_decoder_embeddings = false;
  c.norm_kind = NormKind::RmsNorm;
  c.feed_forward_kind = FeedForwardKind::Gated;
  c.rope_scaling = read_rope_scaling(keys, c);  // after the head width and positions it is checked against
  return c;
}

nlohmann::json llama_config_json(const ModelConfig& c) {
  json j = json::object();
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.d_model;
  j["intermediate_size"] = c.decoder_ffn_dim;
  j["num_hidden_layers"] = c.decoder_layers;
  j["num_attention_heads"] = c.decoder_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.decoder_head_dim;
  j["hidden_act"] = "silu";  // the only one llama_config accepts
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.layer_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = c.attention_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["bos_token_id"] = c.bos_token_id ? json(*c.bos_token_id) : json(nullptr);
  if (c.other_eos_token_ids.empty()) {
    j["eos_token_id"] = c.eos_token_id;
  } else {
    json ids = json::array({c.eos_token_id});
    for (const int id : c.other_eos_token_ids) ids.push_back(id);
    j["eos_token_id"] = ids;
  }
  j["pad_token_id"] = c.pad_token_id;
  return j;
}

}  // namespace ordo
