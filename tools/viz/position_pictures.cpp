#include "tools/viz/position_pictures.h"

#include <algorithm>
#include <string>

#include "ordo/error.hpp"
#include "ordo/options.hpp"

namespace ordo::tools {

namespace {

constexpr std::int64_t kDefaultLength = 64;
constexpr std::int64_t kDefaultDim = 128;  // the shipped models' d_model

std::string directory_of(const PositionPictureRequest& r) { return r.model->directory().string(); }
std::string name_of(const PositionPictureRequest& r) { return r.model->directory().filename().string(); }
const char* stack_name(Stack stack) { return stack == Stack::Encoder ? "encoder" : "decoder"; }

std::int64_t length_of(const PositionPictureRequest& r) {
  const std::int64_t length = r.length > 0 ? r.length : kDefaultLength;
  if (length > kMaxSequenceLength)
    throw OptionError("--length", "at most " + std::to_string(kMaxSequenceLength) + " positions (ordo's limit), got " +
                                    std::to_string(length));
  return length;
}

// The width a model fixes: --dim may repeat it but not change it.
void check_width(const PositionPictureRequest& r, std::int64_t width, const std::string& what) {
  if (r.dim > 0 && r.dim != width)
    throw OptionError("--dim", "the " + what + " of " + directory_of(r) + " is " + std::to_string(width) +
                                 " wide, not " + std::to_string(r.dim) + " (leave --dim out)");
}

// The model's scheme must be the one asked for: its settings are what is drawn.
void check_scheme(const PositionPictureRequest& r, const std::string& wanted) {
  const std::string has = r.model->info().position_encoding;
  if (has == "none")  // not a --scheme: there is nothing to draw
    throw Error(directory_of(r), "uses no positions (position_encoding \"none\"): there is nothing to draw",
                "leave --model out to draw --scheme " + wanted + ", or give a model with positions");
  if (has != wanted)
    throw Error(directory_of(r), "uses " + has + " positions, not " + wanted,
                "pick --scheme " + has + ", or leave --model out");
}

// The model's own table of the requested stack, its scheme checked first.
PositionTable model_table(const PositionPictureRequest& r, const std::string& scheme, std::int64_t steps) {
  check_scheme(r, scheme);
  return r.model->position_table(r.stack, static_cast<int>(steps));
}

// The table's numbers as a panel: rows and columns as the table has them.
HeatmapPanel panel_of(const PositionTable& table, std::string title, std::string row_axis, std::string col_axis) {
  HeatmapPanel panel;
  panel.title = std::move(title);
  panel.values.resize(table.rows, table.cols);
  std::ranges::copy(table.values, panel.values.data());
  panel.row_axis = std::move(row_axis);
  panel.col_axis = std::move(col_axis);
  panel.first_col_number = table.first_relative_position;
  return panel;
}

PositionPicture sinusoidal(const PositionPictureRequest& r) {
  const std::int64_t length = length_of(r);
  const PositionTable table = r.model != nullptr ? model_table(r, "sinusoidal", length)
                                                 : sinusoidal_table(static_cast<int>(length),
                                                                    static_cast<int>(r.dim > 0 ? r.dim : kDefaultDim));
  if (r.model != nullptr) check_width(r, table.cols, "model");
  const bool split = table.layout == "split";
  const std::int64_t dim = table.cols;
  // Row s is what the model adds at step s: position offset + s.
  return {{panel_of(table, "sinusoidal positions (" + std::string(split ? "split: sin | cos" : "interleaved: sin, cos") + ")",
                    "position",
                    split ? "dimension (sin 0.." + std::to_string(dim / 2 - 1) + " | cos)" : "dimension (even: sin, odd: cos)")},
          "value added to the embedding"};
}

PositionPicture learned(const PositionPictureRequest& r) {
  if (r.length > 0) length_of(r);  // --length's own limit first
  const PositionTable table = model_table(r, "learned", r.length);  // 0: every row of the table
  check_width(r, table.cols, "position table");
  return {{panel_of(table, std::string("learned positions (") + stack_name(r.stack) + " table of " + name_of(r) + ")",
                    "position", "dimension")},
          "value added to the embedding"};
}

PositionPicture rope(const PositionPictureRequest& r) {
  const std::int64_t length = length_of(r);
  const PositionTable table = r.model != nullptr ? model_table(r, "rope", length)
                                                 : rotary_table(static_cast<int>(length),
                                                                static_cast<int>(r.dim > 0 ? r.dim : 32));  // the shipped rope model's head width
  if (r.model != nullptr) check_width(r, table.cols, "attention head");
  const bool half = table.layout == "half";
  const std::int64_t dim = table.cols;
  const auto rope_panel = [&](const PositionTable& t, const std::string& what) {
    return panel_of(t,
                    what + " cos/sin table (theta " + std::to_string(static_cast<long long>(t.rope_theta)) +
                        ", head width " + std::to_string(dim) + ")",
                    "position",
                    half ? "dimension (cos 0.." + std::to_string(dim / 2 - 1) + " | sin)" : "dimension (even: cos, odd: sin)");
  };
  if (r.rope_scaling.empty() || r.rope_scaling == "none")
    return {{rope_panel(table, "RoPE")}, "cos / sin of the rotation angle"};
  // The scaled rotations beside the plain ones. A model: the same model loaded with and
  // without the scaling. Without one: a model trained on length / factor positions
  // (yarn's and llama3's original length too), so the picture runs to factor x that.
  const RopeScalingOverride scaling = RopeScalingOverride::parse(r.rope_scaling);
  const PositionTable plain = r.model != nullptr ? r.plain_model->position_table(r.stack, static_cast<int>(length)) : table;
  const PositionTable scaled =
      r.model != nullptr
          ? table
          : rotary_table(static_cast<int>(length), static_cast<int>(dim), table.rope_theta, scaling,
                         std::max(1, static_cast<int>(static_cast<double>(length) / scaling.factor)));
  return {{rope_panel(plain, "plain RoPE"), rope_panel(scaled, "RoPE, rope_scaling " + r.rope_scaling)},
          "cos / sin of the rotation angle (times YaRN's attention factor)"};
}

// A score-bias scheme's picture: a row per head, the bias it adds to a query's score for
// the key at each relative position key - query.
PositionPicture bias_picture(const PositionTable& table, std::string title) {
  return {{panel_of(table, std::move(title), "head", "relative position (key - query)")},
          "bias added to the attention score"};
}

PositionPicture alibi(const PositionPictureRequest& r) {
  const std::int64_t length = length_of(r);
  const PositionTable table = r.model != nullptr ? model_table(r, "alibi", length)
                                                 : alibi_table(static_cast<int>(length),
                                                               static_cast<int>(r.heads > 0 ? r.heads : 8), r.stack);
  if (r.model != nullptr && r.heads > 0 && r.heads != table.rows)
    throw OptionError("--heads", "the " + std::string(stack_name(r.stack)) + " of " + directory_of(r) + " has " +
                                     std::to_string(table.rows) + " heads, not " + std::to_string(r.heads) +
                                     " (leave --heads out)");
  return bias_picture(table, "ALiBi bias, " + std::to_string(table.rows) + " heads (" + stack_name(r.stack) + ": " +
                                 (r.stack == Stack::Encoder ? "-m|i-j|" : "causal") + ")");
}

PositionPicture t5_relative(const PositionPictureRequest& r) {
  const PositionTable table = model_table(r, "t5_relative", length_of(r));
  return bias_picture(table, std::string("T5 relative bias (") + stack_name(r.stack) + " table of " + name_of(r) + ")");
}

}  // namespace
const std::vector<PositionScheme>& position_schemes() {
  static const std::vector<PositionScheme> schemes{
      {"sinusoidal", "sin/cos of position x frequency (Vaswani et al.; --model: that model's layout and offset)",
       false, sinusoidal},
      {"learned", "the model's trained position table (needs --model)", true, learned},
      {"rope", "the cos/sin of the rotary angles, per head dimension (--dim: head width; --model: its theta; "
       "--rope-scaling TYPE:FACTOR: the scaled table beside the plain one)", false,
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
