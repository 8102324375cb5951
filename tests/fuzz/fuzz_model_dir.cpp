// libFuzzer target: a whole model directory, config.json and model.safetensors together
// (the input is the config, a kFileSeparator line, then the weights), loaded by
// LoadedModel::load (behind ordo::Model::load) as `ordo --model DIR` loads it. What loads must also run: a few decode
// steps (greedy and beam 2) and a teacher-forced score, so that a shape the checks let
// through reaches the kernels under AddressSanitizer instead of passing unseen.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/score.h"
#include "engine/search.h"
#include "models/loaded_model.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

void run_a_little(const ordo::LoadedModel& model) {
  const ordo::Transformer& transformer = model.transformer();
  const ordo::SpecialTokens& tokens = transformer.tokens;
  ordo::DecodeRequest request;
  if (transformer.decoder_only())
    request.prefix = {tokens.bos.value_or(tokens.pad)};
  else
    request.source = {tokens.pad, tokens.eos};
  const std::vector<ordo::DecodeRequest> requests{request, request};
  ordo::DecodeWorkspace workspace;
  for (const ordo::Index beam : {1, 2}) {
    ordo::DecodingOptions options;
    options.beam_size = beam;
    options.max_length = 3;
    (void)ordo::decode_requests(transformer, requests, options, {}, workspace);
  }
  const std::vector<std::vector<int>> sources{request.source};
  const std::vector<std::vector<int>> targets{{tokens.pad, tokens.eos}};
  (void)ordo::score_batch(transformer, transformer.decoder_only() ? std::span<const std::vector<int>>() : sources,
                          targets, workspace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = ordo::fuzz::split_files(ordo::fuzz::as_text(data, size));
  const std::filesystem::path& dir = ordo::fuzz::fresh_directory();
  ordo::fuzz::write_file(dir / "config.json", parts[0]);
  if (parts.size() > 1) ordo::fuzz::write_file(dir / "model.safetensors", parts[1]);
  ordo::fuzz::refusal_is_fine([&] {
    const auto model = ordo::LoadedModel::load(dir, [](const std::string&) {});  // unused tensors: fine
    run_a_little(*model);
  });
  return 0;
}
