#include "engine/position_tables.h"

#include <string>

#include "engine/error.h"
#include "engine/limits.h"

namespace ordo {

namespace {

PositionTable sized(PositionTable::Kind kind, Index rows, Index cols) {
  PositionTable table;
  table.kind = kind;
  table.rows = static_cast<int>(rows);
  table.cols = static_cast<int>(cols);
  table.values.assign(static_cast<std::size_t>(rows * cols), 0.0f);
  return table;
}

// The table's values as the engine's matrix view: the position objects write into it.
MatrixRef values_of(PositionTable& table) { return {table.values.data(), table.rows, table.cols}; }

}  // namespace

float PositionTable::at(int row, int col) const {
  if (row < 0 || row >= rows || col < 0 || col >= cols)
    throw Error("position table", "(" + std::to_string(row) + ", " + std::to_string(col) + ") is outside its " +
                                      std::to_string(rows) + " x " + std::to_string(cols) + " values");
  return values[static_cast<std::size_t>(row) * static_cast<std::size_t>(cols) + static_cast<std::size_t>(col)];
}

void check_table_steps(Index steps) {
  if (steps < 1 || steps > kMaxSequenceLength)
    throw Error("position table", std::to_string(steps) + " steps is not in 1.." + std::to_string(kMaxSequenceLength),
                "ask for at least one step and at most ordo's sequence limit");
}

PositionTable added_table(const AdditivePositions& positions, Index steps, Index width) {
  check_table_steps(steps);
  positions.check_steps(0, steps);  // a learned table says how many rows it has
  PositionTable table = sized(PositionTable::Kind::Added, steps, width);
  positions.add(values_of(table), 0);  // onto zeros: the vectors themselves
  return table;
}

PositionTable rotation_table(const RotaryEmbedding& rotary, RopeLayout layout, Index steps, Index head_width) {
  check_table_steps(steps);
  PositionTable table = sized(PositionTable::Kind::Rotation, steps, head_width);
  const MatrixRef values = values_of(table);
  const bool half = layout == RopeLayout::Half;
  for (Index s = 0; s < steps; ++s)
    for (Index i = 0; i < head_width / 2; ++i) values(s, half ? i : 2 * i) = 1.0f;
  rotary.rotate(values, 0);
  return table;
}

PositionTable bias_table(const ScoreBias& bias, Index heads, Direction direction, Index steps) {
  check_table_steps(steps);
  const Index keys = direction == Direction::Bidirectional ? 2 * steps - 1 : steps;
  PositionTable table = sized(PositionTable::Kind::ScoreBias, heads, keys);
  table.first_relative_position = static_cast<int>(-(steps - 1));
  const MatrixRef values = values_of(table);
  for (Index h = 0; h < heads; ++h) bias.add(values.row_block(h, 1), h, steps - 1);  // one query row per head
  return table;
}

PositionTable sinusoidal_table(int steps, int width) {
  const SinusoidalPositions positions(width, SinusoidalLayout::Interleaved, SinusoidalFrequencies::Vaswani, 0);
  PositionTable table = added_table(positions, steps, width);
  table.scheme = "sinusoidal";
  table.layout = "interleaved";
  return table;
}

PositionTable rotary_table(int steps, int head_width, double theta) {
  const RotaryEmbedding rotary(head_width, theta, RopeLayout::Half, 0);
  PositionTable table = rotation_table(rotary, RopeLayout::Half, steps, head_width);
  table.scheme = "rope";
  table.layout = "half";
  table.rope_theta = theta;
  return table;
}

PositionTable alibi_table(int steps, int heads, Stack stack) {
  const Direction direction = stack == Stack::Encoder ? Direction::Bidirectional : Direction::Causal;
  const AlibiBias bias(heads, direction);
  PositionTable table = bias_table(bias, heads, direction, steps);
  table.scheme = "alibi";
  return table;
}

}  // namespace ordo
