// The search on sources alone, as the engine-level tests call it: a batch of sources
// (no prefixes) or one source, through decode_requests. Not in the engine: nothing but
// the tests decodes that way (the library's callers build DecodeRequests).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/search.h"

namespace ordo {

// Decodes every source (token ids, eos included) as one batch. `streams` gives each
// source its sampling generator index (default: its position in `sources`); give
// every source of a request a distinct one. Options are validated first (OptionError).
std::vector<DecodeResult> decode_batch(const Transformer& model,
                                       std::span<const std::vector<int>> sources,
                                       const DecodingOptions& options,
                                       std::span<const std::uint64_t> streams = {});
// The same, reusing `workspace`'s buffers.
std::vector<DecodeResult> decode_batch(const Transformer& model,
                                       std::span<const std::vector<int>> sources,
                                       const DecodingOptions& options,
                                       std::span<const std::uint64_t> streams,
                                       DecodeWorkspace& workspace);

// One source; throws Error when it cannot be decoded.
std::vector<Hypothesis> decode(const Transformer& model, std::span<const int> source,
                               const DecodingOptions& options = {});

}  // namespace ordo
