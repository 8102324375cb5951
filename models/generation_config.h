// generation_config.json (Hugging Face): the decoding defaults a checkpoint ships with,
// which the command line's flags and a program's options override. A Marian or M2M100 directory
// without one falls back on the same keys in config.json, as transformers'
// GenerationConfig.from_model_config does (opus-mt's config.json holds num_beams,
// max_length and bad_words_ids).
//
// Keys applied, each validated with an error naming the file and the key:
//   num_beams -> beam_size              length_penalty -> length_penalty
//   max_new_tokens -> max_length        no_repeat_ngram_size -> no_repeat_ngram_size
//   max_length -> max_length - 1 for an encoder-decoder (Hugging Face counts the
//     decoder_start token; ordo counts generated tokens), at most what the decoder's
//     positions allow; not applied to a decoder-only model, where it counts the prompt
//   bad_words_ids -> bad_words_ids      forced_bos_token_id -> forced_bos_token_id
//   decoder_start_token_id, eos_token_id (an id or a list): replace config.json's
// Any other key (do_sample, temperature, top_p, forced_eos_token_id, ...) is not applied.
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/decoding_options.h"
#include "models/config.h"

namespace ordo {

struct GenerationConfig {
  DecodingOptions decoding;                 // DecodingOptions' defaults, with the file's over them
  std::optional<int> decoder_start_token_id;
  std::vector<int> eos_token_ids;           // empty: config.json's; else the first is the primary
  nlohmann::json applied = nlohmann::json::object();  // the keys applied, as read (ordo inspect)
  std::string source;                       // the file they came from; empty: none
};

// `max_generated`: the most tokens the decoder's positions let a translation generate.
// Throws Error naming the file and the key for a mistyped or out-of-range value.
GenerationConfig read_generation_config(const std::filesystem::path& directory, const ModelConfig& config,
                                        Index max_generated);

}  // namespace ordo
