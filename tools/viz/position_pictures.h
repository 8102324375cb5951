// What `ordo viz pe` draws for each position scheme: a picture (one or more heatmap
// panels) of the numbers the library computes with the engine's own position classes
// (ordo/positions.hpp: Model::position_table, or sinusoidal_table and the others without
// a model), never by formulas of its own, so the picture is what the model adds,
// rotates or biases with.
//
// The list is open: a scheme is a name, a line of help and a function from the request
// to panels. Additive schemes draw the position-by-dimension table; a score-bias
// scheme (ALiBi, T5 buckets) would draw one panel of bias over relative distance per
// head, or one [head, distance] panel, with the same request.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ordo/model.hpp"
#include "ordo/positions.hpp"
#include "ordo/rope_scaling.hpp"
#include "tools/viz/heatmap.h"

namespace ordo::tools {

struct PositionPictureRequest {
  std::int64_t length = 0;            // positions (steps from 0); 0: the scheme's default
  std::int64_t dim = 0;               // width; 0: the scheme's default
  std::int64_t heads = 0;             // score-bias schemes without a model: heads; 0: the default
  const Model* model = nullptr;  // the model to read settings or tables from; null: none given
  Stack stack = Stack::Encoder;  // which stack's table, where a model has one per stack
  // rope: --rope-scaling TYPE:FACTOR ("": none), drawn beside the plain table. With a
  // model, `model` is loaded with the scaling and `plain_model` without it.
  std::string rope_scaling;
  const Model* plain_model = nullptr;
};

struct PositionPicture {
  std::vector<HeatmapPanel> panels;
  std::string value_label;  // the legend's caption
};

struct PositionScheme {
  std::string name;   // the --scheme value
  std::string about;  // one line for --help
  bool needs_model = false;
  // Throws Error (or OptionError naming "--length"/"--dim") for a request it cannot draw.
  std::function<PositionPicture(const PositionPictureRequest&)> draw;
};

// Every scheme viz pe knows, in the order --help lists them.
const std::vector<PositionScheme>& position_schemes();
// The scheme called `name`; throws OptionError("--scheme") listing the known ones.
const PositionScheme& position_scheme(const std::string& name);

}  // namespace ordo::tools
