// rotary_table with a RoPE scaling (ordo/rope_scaling.hpp): the engine's own rotation,
// scaled as a model with that rope_scaling is.
#include <string>

#include "engine/error.h"
#include "engine/position_tables.h"
#include "models/rope_scaling_config.h"
#include "ordo/rope_scaling.hpp"

namespace ordo {

PositionTable rotary_table(int steps, int head_width, double theta, const RopeScalingOverride& scaling,
                           int trained_length) {
  scaling.validate();
  if (trained_length < 1)
    throw Error("rotary table", "a trained length of " + std::to_string(trained_length) + " positions",
                "give 1 or more");
  bool known = false;
  RopeScaling s;
  s.type = rope_scaling_type_of(scaling.type, known);
  s.factor = scaling.factor;
  if (s.type == RopeScalingType::Yarn || s.type == RopeScalingType::Llama3)
    s.original_max_position_embeddings = trained_length;
  const RotaryEmbedding rotary(head_width, theta, RopeLayout::Half, 0, s, trained_length);
  PositionTable table = rotation_table(rotary, RopeLayout::Half, steps, head_width);
  table.scheme = "rope";
  table.layout = "half";
  table.rope_theta = theta;
  return table;
}

}  // namespace ordo
