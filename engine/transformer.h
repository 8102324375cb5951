// An encoder-decoder Transformer, bound to its weights: immutable once built, so one
// instance serves any number of threads, each with its own workspaces.
#pragma once

#include "engine/decoder.h"
#include "engine/encoder.h"

namespace ordo {

// The longest source or target ordo runs, whatever the positions would allow: attention
// scores are [T, T] per head (4096^2 floats = 64 MB), and anything longer is a mistake
// in the input more often than a sentence.
inline constexpr Index kMaxSequenceLength = 4096;

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
