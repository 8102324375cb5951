#include "tests/search_support.h"

#include "engine/decode_inputs.h"
#include "engine/error.h"

namespace ordo {

std::vector<DecodeResult> decode_batch(const Transformer& model, std::span<const std::vector<int>> sources,
                                       const DecodingOptions& options, std::span<const std::uint64_t> streams) {
  DecodeWorkspace workspace;
  return decode_batch(model, sources, options, streams, workspace);
}

std::vector<DecodeResult> decode_batch(const Transformer& model, std::span<const std::vector<int>> sources,
                                       const DecodingOptions& options, std::span<const std::uint64_t> streams,
                                       DecodeWorkspace& workspace) {
  std::vector<DecodeRequest> requests(sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) requests[i].source = sources[i];
  return decode_requests(model, requests, options, streams, workspace);
}

std::vector<Hypothesis> decode(const Transformer& model, std::span<const int> source, const DecodingOptions& options) {
  DecodeResult result = std::move(decode_batch(model, batch_of_one(source), options).front());
  if (!result.ok()) throw Error(result.error);
  return std::move(result.hypotheses);
}

}  // namespace ordo
