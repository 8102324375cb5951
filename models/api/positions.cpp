// Model::position_table: a model's positions as the numbers its own layers use, built by
// the same code that builds the model (models/build_transformer.h, stack_positions).
#include <algorithm>
#include <string>

#include "engine/error.h"
#include "engine/position_tables.h"
#include "models/api/internal.h"
#include "models/build_transformer.h"

namespace ordo {

namespace {

const char* stack_name(Stack stack) { return stack == Stack::Encoder ? "encoder" : "decoder"; }

// A learned table's rows (at most ordo's sequence limit) when `steps` is 0; the other
// schemes need a number.
Index steps_for(const StackPositions& positions, int steps, const LoadedModel& model) {
  if (steps > 0) return steps;
  if (model.config().position_encoding == PositionEncoding::Learned)
    return std::min(positions.added->max_steps(), kMaxSequenceLength);
  throw Error(model.directory().string(), "a " + std::string(position_encoding_name(model.config().position_encoding)) +
                                              " table needs a number of steps",
              "ask for 1 or more steps (0 means every row only for a learned table)");
}

}  // namespace

PositionTable Model::position_table(Stack stack, int steps) const {
  const LoadedModel& model = *impl_->model;
  const ModelConfig& c = model.config();
  const std::string where = model.directory().string();
  if (stack == Stack::Encoder && !c.has_encoder())
    throw Error(where, "is decoder-only: it has no encoder positions", "ask for Stack::Decoder");
  if (c.position_encoding == PositionEncoding::None)
    throw Error(where, "uses no positions (position_encoding \"none\"): there is no table",
                "pick a model with positions");
  if (c.position_encoding == PositionEncoding::Learned &&
      !tensor_name(c, stack, Role::Positions, Part::Weight).has_value())
    throw Error(where, std::string("has no learned position table for its ") + stack_name(stack),
                "ask for the other stack");

  const StackPositions positions = stack_positions(c, model.weights(), stack);
  const Index count = steps_for(positions, steps, model);
  PositionTable table;
  switch (c.position_encoding) {
    case PositionEncoding::Sinusoidal:
      table = added_table(*positions.added, count, c.d_model);
      table.layout = sinusoidal_layout_name(c.sinusoidal_layout);
      break;
    case PositionEncoding::Learned:
      table = added_table(*positions.added, count, c.d_model);
      break;
    case PositionEncoding::Rope:
      table = rotation_table(*positions.rotary, c.rope_layout, count, positions.head_dim);
      table.layout = rope_layout_name(c.rope_layout);
      table.rope_theta = c.rope_theta;
      break;
    case PositionEncoding::Alibi:
    case PositionEncoding::T5Relative: {
      const Direction direction = stack == Stack::Encoder ? Direction::Bidirectional : Direction::Causal;
      table = bias_table(*positions.bias, positions.heads, direction, count);
      break;
    }
    case PositionEncoding::None:
      break;  // refused above
  }
  table.scheme = position_encoding_name(c.position_encoding);
  table.offset = static_cast<int>(c.position_offset);
  return table;
}

}  // namespace ordo
