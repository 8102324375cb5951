// An encoder-decoder Transformer, bound to its weights: immutable once built, so one
// instance serves any number of threads, each with its own workspaces.
#pragma once

#include "engine/decoder.h"
#include "engine/encoder.h"
#include "engine/limits.h"

namespace ordo {

struct SpecialTokens {
  int pad = 0;
  int eos = 0;
  int decoder_start = 0;
};

struct Transformer {
  Encoder encoder;
  Decoder decoder;
  SpecialTokens tokens;
};

}  // namespace ordo
