// RoPE's rotations under a RoPE scaling, without a model: what `ordo viz pe --scheme rope
// --rope-scaling yarn:4` draws beside the plain table (a model's own scaled table is
// Model::position_table of a model loaded with LoadOptions::rope_scaling).
#pragma once

#include "ordo/export.hpp"
#include "ordo/options.hpp"
#include "ordo/positions.hpp"

namespace ordo {

// rotary_table (ordo/positions.hpp) with `scaling` applied, for a model trained on
// `trained_length` positions (max_position_embeddings, and yarn's and llama3's
// original_max_position_embeddings; llama3 with low_freq_factor 1 and high_freq_factor
// 4). The `steps` rows are one sequence read in one pass, so dynamic scaling uses the
// base of a sequence of `steps` positions; yarn's attention factor scales the values.
// Throws ordo::OptionError (field "rope_scaling") for a bad scaling, ordo::Error for
// sizes rotary_table refuses or a trained_length < 1.
ORDO_API PositionTable rotary_table(int steps, int head_width, double theta, const RopeScalingOverride& scaling,
                                    int trained_length);

}  // namespace ordo
