// config.json's `rope_scaling`, as Hugging Face transformers reads it, for both families
// (ordo's own format with position_encoding "rope", and LLaMA's):
//
//   null or absent, or {"rope_type": "default"}: plain RoPE
//   {"rope_type": "linear",  "factor"}
//   {"rope_type": "dynamic", "factor", "original_max_position_embeddings" (optional;
//                            transformers reads it and does not use it, nor does ordo)}
//   {"rope_type": "yarn",    "factor", "original_max_position_embeddings"
//                            [= max_position_embeddings], "beta_fast" [32],
//                            "beta_slow" [1], "attention_factor" [0.1 ln(factor) + 1],
//                            "truncate" [true]}
//   {"rope_type": "llama3",  "factor", "low_freq_factor", "high_freq_factor",
//                            "original_max_position_embeddings"}
//
// The older key "type" may stand for "rope_type" (both: they must agree). What each
// does is in engine/rope_scaling.h. A type ordo does not implement (longrope, ...) is
// refused by name, and so is a key the type does not have (mscale, say): ignoring it
// would silently change the numbers. Every error names the key: `factor` <= 0 or not
// finite, `original_max_position_embeddings` <= 0 or, for yarn and llama3, above
// max_position_embeddings, `low_freq_factor` >= `high_freq_factor`, a scaling on a model
// without RoPE.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "engine/rope_scaling.h"
#include "models/config_reader.h"

namespace ordo {

struct ModelConfig;

// Reads `rope_scaling` of the config object `keys` reads (absent or null: none). Checks
// it against the model (`config`: positions, max_position_embeddings, head widths),
// which must be read first. Throws Error naming `rope_scaling.<key>`.
RopeScaling read_rope_scaling(const config_reader::KeyReader& keys, const ModelConfig& config);

// The `rope_scaling` value config.json would hold for `scaling`, defaults filled in;
// null for none.
nlohmann::json rope_scaling_json(const RopeScaling& scaling);

// The names `rope_type` (and `--rope-scaling`) accept; "default" and "none" mean plain RoPE.
RopeScalingType rope_scaling_type_of(std::string_view name, bool& known);

// A run-time override (`--rope-scaling TYPE:FACTOR`, LoadOptions::rope_scaling) applied
// to a config read from `source`: the config's own parameters of that type are kept,
// others get transformers' defaults (yarn and llama3: original_max_position_embeddings =
// max_position_embeddings; llama3: low_freq_factor 1, high_freq_factor 4, as Llama 3.1).
// Throws OptionError (field "rope_scaling") for a model without RoPE or a bad value.
void override_rope_scaling(ModelConfig& config, RopeScalingType type, double factor);

}  // namespace ordo
