// What a positional scheme puts into a model, as numbers: the vector added to the
// embedding at each step, the rotation RoPE applies at each step, or the bias a query's
// score gets for each relative position. Computed by the very classes the model runs,
// so a picture of a table (`ordo viz pe`) is what the model adds, rotates or biases with.
//
//   ordo::PositionTable t = model.position_table(ordo::Stack::Encoder, 64);
//   float v = t.at(5, 0);  // learned/sinusoidal: dimension 0 of the vector added at step 5
//
// A model's own tables come from Model::position_table (models/api/ordo/model.hpp); the
// formula schemes can also be computed without a model, with the functions below.
#pragma once

#include <string>
#include <vector>

#include "ordo/export.hpp"

namespace ordo {

// The two stacks of an encoder-decoder; a decoder-only model has only the decoder.
enum class Stack { Encoder, Decoder };

// One scheme's numbers over a number of steps (positions counted from a sequence's start).
struct ORDO_API PositionTable {
  enum class Kind {
    Added,      // [steps, d_model]: the vector added to the token embedding at each step
    Rotation,   // [steps, head width]: each rotated pair's (cos, sin) at each step, in the
                // pair's own two places (the rotation applied to (1, 0))
    ScoreBias,  // [heads, relative positions]: the bias a query's score gets for the key
                // at key - query = first_relative_position + column
  };
  Kind kind = Kind::Added;
  std::string scheme;                // "sinusoidal", "learned", "rope", "alibi" or "t5_relative"
  std::string layout;                // sinusoidal: "interleaved" (sin, cos) or "split" (sin half |
                                     // cos half); rope: "half" (pairs i, i + w/2) or "interleaved"
                                     // (pairs 2i, 2i+1); other schemes: ""
  double rope_theta = 0;             // rope: the base of its frequencies; other schemes: 0
  int offset = 0;                    // step 0's position (the model's position_offset)
  int rows = 0;                      // Added, Rotation: steps; ScoreBias: heads
  int cols = 0;                      // Added: d_model; Rotation: head width; ScoreBias: 2 steps - 1
                                     // (an encoder looks both ways) or steps (a causal decoder)
  int first_relative_position = 0;   // ScoreBias: -(steps - 1); else 0
  std::vector<float> values;         // [rows, cols], row-major

  // The value at (row, col). Throws ordo::Error outside [rows, cols].
  float at(int row, int col) const;
};

// Without a model, each scheme as a model with these settings and position_offset 0 runs
// it. `steps` is 1 .. kMaxSequenceLength (ordo/options.hpp); each throws ordo::Error for a
// size it cannot take, saying which.
//
// Vaswani et al.'s sinusoids, interleaved (sin at even dimensions, cos at odd); width even.
ORDO_API PositionTable sinusoidal_table(int steps, int width);
// RoPE's rotations for one head of `head_width` (even) dimensions, pairs (i, i + w/2) as
// Hugging Face LLaMA rotates them; theta > 0.
ORDO_API PositionTable rotary_table(int steps, int head_width, double theta = 10000.0);
// ALiBi's biases for `heads` heads, from the paper's slopes: both ways for the encoder,
// causal for the decoder.
ORDO_API PositionTable alibi_table(int steps, int heads, Stack stack);

}  // namespace ordo
