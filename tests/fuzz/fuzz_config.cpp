// libFuzzer target: config.json of every family (model_type "ordo", "llama", "marian",
// "t5", "mt5" and "m2m_100"; the seeds hold each, and mutations switch between them).
// What is accepted must also expand into its tensor table (when the layer count is one a
// file could hold), and a config of every family but LLaMA must survive its own to_json(): what
// `ordo inspect` prints reads back as the same config.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "models/config.h"
#include "models/tensor_names.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<ordo::ModelConfig> config;
  ordo::fuzz::refusal_is_fine([&] { config = ordo::ModelConfig::parse(ordo::fuzz::as_text(data, size), "config.json"); });
  if (!config) return 0;
  // The weights bound the layer count before the table is expanded (models/weights.cpp);
  // a fuzz input has no weights, so only small counts are expanded here.
  if (config->encoder_layers <= 8 && config->decoder_layers <= 8) (void)ordo::expected_tensors(*config);
  if (config->family == ordo::Family::Llama) return 0;
  // Outside refusal_is_fine: a refusal of ordo's own output is a finding.
  const nlohmann::json emitted = config->to_json();
  if (ordo::ModelConfig::from_json(emitted, "emitted config").to_json() != emitted) {
    std::fprintf(stderr, "config.json does not survive to_json(): %s\n", emitted.dump().c_str());
    __builtin_trap();
  }
  return 0;
}
