// A Transformer bound to its weights: an encoder-decoder, or a decoder-only model (no
// encoder, no cross-attention). Immutable once built, so one instance serves any
// number of threads, each with its own workspaces.
#pragma once

#include <algorithm>
#include <optional>
#include <vector>

#include "engine/decoder.h"
#include "engine/encoder.h"
#include "engine/limits.h"

namespace ordo {

struct SpecialTokens {
  int pad = 0;
  int eos = 0;                 // appended to sources; ends a hypothesis
  std::vector<int> other_eos;  // further ids that also end one (LLaMA configs list several)
  int decoder_start = 0;       // the decoder's first input in an encoder-decoder model
  std::optional<int> bos;      // put before a decoder-only model's prompt, when it has one

  bool is_eos(int id) const {
    return id == eos || std::find(other_eos.begin(), other_eos.end(), id) != other_eos.end();
  }
};

struct Transformer {
  std::optional<Encoder> encoder;  // empty: decoder-only
  Decoder decoder;
  SpecialTokens tokens;

  bool decoder_only() const { return !encoder.has_value(); }
};

}  // namespace ordo
