#include "tools/position_pictures.h"

#include <string>

#include "engine/error.h"
#include "engine/limits.h"
#include "engine/positions.h"

namespace ordo::tools {

namespace {

constexpr Index kDefaultLength = 64;
constexpr Index kDefaultDim = 128;  // the shipped models' d_model

Index length_of(const PositionPictureRequest& r) {
  const Index length = r.length > 0 ? r.length : kDefaultLength;
  if (length > kMaxSequenceLength)
    throw OptionError("--length", "at most " + std::to_string(kMaxSequenceLength) + " positions (ordo's limit), got " +
                                    std::to_string(length));
  return length;
}

// The width a model fixes: --dim may repeat it but not change it.
Index model_width(const PositionPictureRequest& r, Index width, const std::string& what) {
  if (r.dim > 0 && r.dim != width)
    throw OptionError("--dim", "the " + what + " of " + r.model->directory().string() + " is " + std::to_string(width) +
                                 " wide, not " + std::to_string(r.dim) + " (leave --dim out)");
  return width;
}

// The model's scheme must be the one asked for: its settings are what is drawn.
void check_scheme(const PositionPictureRequest& r, PositionEncoding wanted) {
  const PositionEncoding has = r.model->config().position_encoding;
  if (has != wanted)
    throw Error(r.model->directory().string(),
                "uses " + std::string(position_encoding_name(has)) + " positions, not " +
                    std::string(position_encoding_name(wanted)),
                "pick --scheme " + std::string(position_encoding_name(has)) + ", or leave --model out");
}

HeatmapPanel table_panel(std::string title, Index length, Index dim, std::string col_axis) {
  HeatmapPanel panel;
  panel.title = std::move(title);
  panel.values.resize(length, dim);
  panel.row_axis = "position";
  panel.col_axis = std::move(col_axis);
  return panel;
}

PositionPicture sinusoidal(const PositionPictureRequest& r) {
  SinusoidalLayout layout = SinusoidalLayout::Interleaved;
  SinusoidalFrequencies frequencies = SinusoidalFrequencies::Vaswani;
  Index offset = 0, dim = r.dim > 0 ? r.dim : kDefaultDim;
  if (r.model != nullptr) {
    check_scheme(r, PositionEncoding::Sinusoidal);
    const ModelConfig& c = r.model->config();
    layout = c.sinusoidal_layout;
    frequencies = c.sinusoidal_frequencies;
    offset = c.position_offset;
    dim = model_width(r, c.d_model, "model");
  }
  const Index length = length_of(r);
  const SinusoidalPositions positions(dim, layout, frequencies, offset);
  const bool split = layout == SinusoidalLayout::Split;
  HeatmapPanel panel = table_panel(
      "sinusoidal positions (" + std::string(split ? "split: sin | cos" : "interleaved: sin, cos") + ")", length, dim,
      split ? "dimension (sin 0.." + std::to_string(dim / 2 - 1) + " | cos)" : "dimension (even: sin, odd: cos)");
  // Step s is absolute position offset + s, as the model adds it.
  for (Index s = 0; s < length; ++s) positions.encode(offset + s, panel.values.row(s));
  return {{std::move(panel)}, "value added to the embedding"};
}

PositionPicture learned(const PositionPictureRequest& r) {
  check_scheme(r, PositionEncoding::Learned);
  const ModelConfig& c = r.model->config();
  const Index dim = model_width(r, c.d_model, "position table");
  const auto name = tensor_name(c, r.stack, Role::Positions, Part::Weight);
  const TensorView table = name ? r.model->weights().get(*name) : TensorView{};
  if (table.empty())
    throw Error(r.model->directory().string(), "has no learned position table for its " +
                                                   std::string(r.stack == Stack::Encoder ? "encoder" : "decoder"),
                "try --stack decoder, or a model with learned positions");
  const LearnedPositions positions(table, c.position_offset);
  const Index length = r.length > 0 ? r.length : positions.max_steps();
  positions.check_steps(0, length);  // says how many rows the table has
  HeatmapPanel panel = table_panel(std::string("learned positions (") +
                                       (r.stack == Stack::Encoder ? "encoder" : "decoder") + " table of " +
                                       r.model->directory().filename().string() + ")",
                                   length, dim, "dimension");
  // The rows the model adds: positions onto zeros.
  panel.values.fill(0.0f);
  positions.add(panel.values, 0);
  return {{std::move(panel)}, "value added to the embedding"};
}

PositionPicture rope(const PositionPictureRequest& r) {
  double theta = 10000.0;
  RopeLayout layout = RopeLayout::Half;
  Index offset = 0, dim = r.dim > 0 ? r.dim : 32;  // the shipped rope model's head width
  if (r.model != nullptr) {
    check_scheme(r, PositionEncoding::Rope);
    const ModelConfig& c = r.model->config();
    theta = c.rope_theta;
    layout = c.rope_layout;
    offset = c.position_offset;
    dim = model_width(r, c.has_encoder() ? c.encoder_head_dim() : c.decoder_head_dim(), "attention head");
  }
  const Index length = length_of(r);
  const RotaryEmbedding rotary(dim, theta, layout, offset);
  const bool half = layout == RopeLayout::Half;
  HeatmapPanel panel = table_panel(
      "RoPE cos/sin table (theta " + std::to_string(static_cast<long long>(theta)) + ", head width " +
          std::to_string(dim) + ")",
      length, dim,
      half ? "dimension (cos 0.." + std::to_string(dim / 2 - 1) + " | sin)" : "dimension (even: cos, odd: sin)");
  // Rotating the vector with 1 in the first coordinate of every rotated pair gives
  // (cos, sin) of each pair's angle at that step, in the pair's own places.
  panel.values.fill(0.0f);
  for (Index s = 0; s < length; ++s)
    for (Index i = 0; i < dim / 2; ++i) panel.values(s, half ? i : 2 * i) = 1.0f;
  rotary.rotate(panel.values, 0);
  return {{std::move(panel)}, "cos / sin of the rotation angle"};
}

}  // namespace

const std::vector<PositionScheme>& position_schemes() {
  static const std::vector<PositionScheme> schemes{
      {"sinusoidal", "sin/cos of position x frequency (Vaswani et al.; --model: that model's layout and offset)",
       false, sinusoidal},
      {"learned", "the model's trained position table (needs --model)", true, learned},
      {"rope", "the cos/sin of the rotary angles, per head dimension (--dim: head width; --model: its theta)", false,
       rope},
  };
  return schemes;
}

const PositionScheme& position_scheme(const std::string& name) {
  std::string known;
  for (const PositionScheme& s : position_schemes()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw OptionError("--scheme", "unknown scheme '" + name + "' (known: " + known + ")");
}

}  // namespace ordo::tools
