// Binds checked weights to the engine's layers, as the config describes them.
#pragma once

#include <memory>

#include "engine/positions.h"
#include "engine/transformer.h"
#include "models/config.h"
#include "models/weights.h"

namespace ordo {

// The returned Transformer holds views into `weights`, which must outlive it.
Transformer build_transformer(const ModelConfig& config, const WeightStore& weights);

// The positions one stack runs, built exactly as build_transformer builds them: what its
// embedding adds (NoPositions for schemes that add nothing), and its self-attention's
// rotation and score bias (null where the scheme has none). Views into `weights`.
struct StackPositions {
  std::shared_ptr<const AdditivePositions> added;
  std::shared_ptr<const RotaryEmbedding> rotary;
  std::shared_ptr<const ScoreBias> bias;
  Index heads = 0;      // the stack's attention heads
  Index head_dim = 0;   // their width
};
StackPositions stack_positions(const ModelConfig& config, const WeightStore& weights, Stack stack);

}  // namespace ordo
