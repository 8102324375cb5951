#include "models/generation_config.h"

#include <algorithm>

#include "engine/regular_file.h"
#include "models/config_reader.h"
#include "models/json_file.h"
#include "models/json_message.h"

namespace ordo {

using namespace config_reader;

namespace {

// A value that may be null (transformers writes null for an unset key).
const json* set(const KeyReader& keys, const char* key) {
  const json* value = keys.find(key);
  return value == nullptr || value->is_null() ? nullptr : value;
}

int bounded_int(const KeyReader& keys, const char* key, const json& value, Index low, Index high) {
  const Index n = keys.integer(key, value);
  if (n < low || n > high)
    keys.fail(key, std::to_string(n) + " is outside [" + std::to_string(low) + ", " + std::to_string(high) + "]");
  return static_cast<int>(n);
}

}  // namespace

GenerationConfig read_generation_config(const std::filesystem::path& directory, const ModelConfig& config,
                                        Index max_generated) {
  GenerationConfig g;
  std::filesystem::path path = directory / "generation_config.json";
  if (!exists_quietly(path)) {
    // Hugging Face families: from_model_config reads the same keys in config.json.
    if (config.family != Family::Marian && config.family != Family::T5 && config.family != Family::M2M100) return g;
    path = directory / "config.json";
  }
  g.source = path.string();
  constexpr std::uint64_t kMaxBytes = 16u << 20;  // a few hundred bytes in practice
  const json object = read_json_object(path, kMaxBytes, "a generation_config.json");
  const KeyReader keys(object, g.source);
  const Index vocab = config.decoder_vocab_size;
  const auto note = [&](const char* key) { g.applied[key] = object.at(key); };

  if (const json* v = set(keys, "num_beams")) {
    g.decoding.beam_size = bounded_int(keys, "num_beams", *v, 1, 1024);
    note("num_beams");
  }
  if (const json* v = set(keys, "max_new_tokens")) {
    g.decoding.max_length = std::min<int>(bounded_int(keys, "max_new_tokens", *v, 1, kMaxSequenceLength),
                                          static_cast<int>(max_generated));
    g.decoding.max_length_is_ceiling = true;  // the checkpoint's, not a request: a prompt shortens it
    note("max_new_tokens");
  } else if (const json* v = set(keys, "max_length"); v != nullptr && config.has_encoder()) {
    // Hugging Face's length holds decoder_start; a longer one than the positions allow
    // would fail there at the table's end, and is cut to it here.
    const int hf = bounded_int(keys, "max_length", *v, 2, kMaxSequenceLength + 1);
    g.decoding.max_length = std::min<int>(hf - 1, static_cast<int>(max_generated));
    g.decoding.max_length_is_ceiling = true;
    note("max_length");
  }
  if (keys.find("length_penalty") != nullptr) {
    g.decoding.length_penalty = keys.real("length_penalty", 1.0);
    note("length_penalty");
  }
  if (const json* v = set(keys, "no_repeat_ngram_size")) {
    g.decoding.no_repeat_ngram_size = bounded_int(keys, "no_repeat_ngram_size", *v, 0, kMaxSequenceLength);
    note("no_repeat_ngram_size");
  }
  if (const json* v = set(keys, "bad_words_ids")) {
    if (!v->is_array()) keys.fail("bad_words_ids", "expected a list of id lists, got " + describe_type(*v));
    for (const json& words : *v) {
      if (!words.is_array() || words.empty())
        keys.fail("bad_words_ids", "expected a list of non-empty id lists, got " + json_excerpt(words));
      std::vector<int> ids;
      for (const json& id : words) ids.push_back(bounded_int(keys, "bad_words_ids", id, 0, vocab - 1));
      g.decoding.bad_words_ids.push_back(std::move(ids));
    }
    note("bad_words_ids");
  }
  if (const json* v = set(keys, "forced_bos_token_id")) {
    g.decoding.forced_bos_token_id = bounded_int(keys, "forced_bos_token_id", *v, 0, vocab - 1);
    note("forced_bos_token_id");
  }
  if (const json* v = set(keys, "decoder_start_token_id")) {
    g.decoder_start_token_id = bounded_int(keys, "decoder_start_token_id", *v, 0, vocab - 1);
    note("decoder_start_token_id");
  }
  if (const json* v = set(keys, "eos_token_id")) {
    const json list = v->is_array() ? *v : json::array({*v});
    if (list.empty()) keys.fail("eos_token_id", "is an empty list", "give at least one id");
    for (const json& id : list) {
      const int eos = bounded_int(keys, "eos_token_id", id, 0, vocab - 1);
      if (std::find(g.eos_token_ids.begin(), g.eos_token_ids.end(), eos) != g.eos_token_ids.end())
        keys.fail("eos_token_id", "token id " + std::to_string(eos) + " is listed twice");
      g.eos_token_ids.push_back(eos);
    }
    note("eos_token_id");
  }
  return g;
}

}  // namespace ordo
