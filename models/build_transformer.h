// Binds checked weights to the engine's layers, as the config describes them.
#pragma once

#include "engine/transformer.h"
#include "models/config.h"
#include "models/weights.h"

namespace ordo {

// The returned Transformer holds views into `weights`, which must outlive it.
Transformer build_transformer(const ModelConfig& config, const WeightStore& weights);

}  // namespace ordo
