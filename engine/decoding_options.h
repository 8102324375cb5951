// How to decode (ordo::DecodingOptions, the public struct in ordo/options.hpp, which the
// search reads directly): its bounds, and the maximum length it resolves to for one
// request. DecodingOptions::validate() is defined here, with the bounds it checks.
#pragma once

#include <cstdint>

#include "engine/tensor.h"
#include "ordo/options.hpp"

namespace ordo {

class Decoder;

// The range of repetition_penalty. R and 1/R are mirror images (discourage or encourage
// repetition); beyond 100 a penalized logit is scaled more than 100-fold, which already
// makes its token certain or impossible, and a far larger factor (1e-40) overflows
// float logits to infinity.
inline constexpr double kMinRepetitionPenalty = 0.01;
inline constexpr double kMaxRepetitionPenalty = 100.0;

// The effective maximum length under `options` for a source of `source_length` tokens
// (0 for a decoder-only model) when the decoder reads `fed` tokens before its first
// prediction (decoder_start and any forced prefix, or the prompt); throws OptionError
// when an explicit max_length is beyond what the decoder's positions or ordo allow, or
// below min_length, and Error when the prompt alone fills the positions.
Index resolve_max_length(const DecodingOptions& options, const Decoder& decoder, Index source_length, Index fed = 1);

}  // namespace ordo
