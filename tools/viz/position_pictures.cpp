#include "tools/viz/position_pictures.h"

#include <algorithm>
#include <string>

#include "ordo/error.hpp"
#include "engine/limits.h"
#include "engine/positions.h"
#include "engine/relative_positions.h"
#include "models/api/internal.h"  // the loaded model: its config and position tables

namespace ordo::tools {

namespace {

// The loaded model behind the request's public one: its config and trained tables are
// what the picture draws.
const LoadedModel& model_of(const PositionPictureRequest& r) { return detail::loaded(*r.model); }

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
    throw OptionError("--dim", "the " + what + " of " + model_of(r).directory().string() + " is " + std::to_string(width) +
                                 " wide, not " + std::to_string(r.dim) + " (leave --dim out)");
  return width;
}

// The model's scheme must be the one asked for: its settings are what is drawn.
void check_scheme(const PositionPictureRequest& r, PositionEncoding wanted) {
  const PositionEncoding has = model_of(r).config().position_encoding;
  if (has != wanted)
    throw Error(model_of(r).directory().string(),
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
    const ModelConfig& c = model_of(r).config();
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
  const ModelConfig& c = model_of(r).config();
  const Index dim = model_width(r, c.d_model, "position table");
  const auto name = tensor_name(c, r.stack, Role::Positions, Part::Weight);
  const TensorView table = name ? model_of(r).weights().get(*name) : TensorView{};
  if (table.empty())
    throw Error(model_of(r).directory().string(), "has no learned position table for its " +
                                                   std::string(r.stack == Stack::Encoder ? "encoder" : "decoder"),
                "try --stack decoder, or a model with learned positions");
  const LearnedPositions positions(table, c.position_offset);
  const Index length = r.length > 0 ? r.length : positions.max_steps();
  positions.check_steps(0, length);  // says how many rows the table has
  HeatmapPanel panel = table_panel(std::string("learned positions (") +
                                       (r.stack == Stack::Encoder ? "encoder" : "decoder") + " table of " +
                                       model_of(r).directory().filename().string() + ")",
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
    const ModelConfig& c = model_of(r).config();
    theta = c.rope_theta;
    layout = c.rope_layout;
    offset = c.position_offset;
    dim = model_width(r, c.has_encoder() ? c.encoder_head_dim() : c.decoder_head_dim, "attention head");
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

// A score-bias scheme's picture: a row per head, the bias it adds to a query's score
// for the key at each relative position key - query. The bias object itself is asked,
// for one query row: at step L-1 over keys 0 .. 2L-2 (bidirectional) or 0 .. L-1
// (causal: later keys are masked, so only -(L-1) .. 0 exist).
PositionPicture bias_picture(const ScoreBias& bias, Index heads, Direction direction, Index length,
                             std::string title) {
  const Index keys = direction == Direction::Bidirectional ? 2 * length - 1 : length;
  HeatmapPanel panel;
  panel.title = std::move(title);
  panel.values.resize(heads, keys);
  panel.row_axis = "head";
  panel.col_axis = "relative position (key - query)";
  panel.first_col_number = -(length - 1);
  Matrix row(1, keys);
  for (Index h = 0; h < heads; ++h) {
    row.fill(0.0f);
    bias.add(row, h, length - 1);
    std::ranges::copy(row.row(0), panel.values.row(h).begin());
  }
  return {{std::move(panel)}, "bias added to the attention score"};
}

Direction direction_of(Stack stack) { return stack == Stack::Encoder ? Direction::Bidirectional : Direction::Causal; }
const char* stack_name(Stack stack) { return stack == Stack::Encoder ? "encoder" : "decoder"; }

PositionPicture alibi(const PositionPictureRequest& r) {
  Index heads = r.heads > 0 ? r.heads : 8;
  if (r.model != nullptr) {
    check_scheme(r, PositionEncoding::Alibi);
    const ModelConfig& c = model_of(r).config();
    const Index model_heads = r.stack == Stack::Encoder ? c.encoder_attention_heads : c.decoder_attention_heads;
    if (r.heads > 0 && r.heads != model_heads)
      throw OptionError("--heads", "the " + std::string(stack_name(r.stack)) + " of " +
                                       model_of(r).directory().string() + " has " + std::to_string(model_heads) +
                                       " heads, not " + std::to_string(r.heads) + " (leave --heads out)");
    heads = model_heads;
  }
  const Index length = length_of(r);
  const AlibiBias bias(heads, direction_of(r.stack));
  return bias_picture(bias, heads, direction_of(r.stack), length,
                      "ALiBi bias, " + std::to_string(heads) + " heads (" + stack_name(r.stack) + ": " +
                          (r.stack == Stack::Encoder ? "-m|i-j|" : "causal") + ")");
}

PositionPicture t5_relative(const PositionPictureRequest& r) {
  check_scheme(r, PositionEncoding::T5Relative);
  const ModelConfig& c = model_of(r).config();
  const auto name = tensor_name(c, r.stack, Role::RelativeBias, Part::Weight);
  const TensorView table = name ? model_of(r).weights().get(*name) : TensorView{};
  if (table.empty())
    throw Error(model_of(r).directory().string(),
                std::string("has no relative attention bias table for its ") + stack_name(r.stack),
                "try the other --stack");
  const Index length = length_of(r);
  const T5RelativeBias bias(table, direction_of(r.stack), c.relative_attention_max_distance);
  return bias_picture(bias, table.dim(1), direction_of(r.stack), length,
                      std::string("T5 relative bias (") + stack_name(r.stack) + " table of " +
                          model_of(r).directory().filename().string() + ")");
}

}  // namespace

const std::vector<PositionScheme>& position_schemes() {
  static const std::vector<PositionScheme> schemes{
      {"sinusoidal", "sin/cos of position x frequency (Vaswani et al.; --model: that model's layout and offset)",
       false, sinusoidal},
      {"learned", "the model's trained position table (needs --model)", true, learned},
      {"rope", "the cos/sin of the rotary angles, per head dimension (--dim: head width; --model: its theta)", false,
       rope},
      {"alibi", "each head's bias over relative position, -m_h * distance (--heads, or --model's; --stack decoder: causal)",
       false, alibi},
      {"t5_relative", "each head's learned bias over relative position, by T5's buckets (needs --model)", true,
       t5_relative},
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
