// The public PositionTable (ordo/positions.hpp) filled from the engine's own position
// objects: a table is what those objects add, rotate or bias with, asked the way the
// model asks them. The caller says which scheme and settings it describes.
#pragma once

#include "engine/positions.h"
#include "engine/relative_positions.h"
#include "ordo/positions.hpp"

namespace ordo {

// Throws Error unless 1 <= steps <= kMaxSequenceLength.
void check_table_steps(Index steps);

// [steps, width]: what `positions` adds at steps 0 .. steps-1 (onto zeros).
PositionTable added_table(const AdditivePositions& positions, Index steps, Index width);

// [steps, head_width]: `rotary` applied to (1, 0) in every rotated pair's places.
PositionTable rotation_table(const RotaryEmbedding& rotary, RopeLayout layout, Index steps, Index head_width);

// [heads, relative positions]: the biases a query at step steps-1 gives keys 0 .. 2 steps-2
// (bidirectional) or 0 .. steps-1 (causal: later keys are masked and never biased).
PositionTable bias_table(const ScoreBias& bias, Index heads, Direction direction, Index steps);

}  // namespace ordo
