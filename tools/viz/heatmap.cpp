#include "tools/viz/heatmap.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

#include "ordo/error.hpp"
#include "tools/viz/font.h"

namespace ordo::tools {

namespace {

// Sampled from matplotlib's viridis and ColorBrewer's RdBu (reversed: blue is low), at
// even steps; colours between samples are interpolated linearly.
constexpr std::array<Rgb, 9> kViridis{{{68, 1, 84},
                                        {72, 40, 120},
                                        {62, 73, 137},
                                        {49, 104, 142},
                                        {38, 130, 142},
                                        {31, 158, 137},
                                        {53, 183, 121},
                                        {110, 206, 88},
                                        {253, 231, 37}}};
constexpr std::array<Rgb, 11> kBlueWhiteRed{{{5, 48, 97},
                                             {33, 102, 172},
                                             {67, 147, 195},
                                             {146, 197, 222},
                                             {209, 229, 240},
                                             {247, 247, 247},
                                             {253, 219, 199},
                                             {244, 165, 130},
                                             {214, 96, 77},
                                             {178, 24, 43},
                                             {103, 0, 31}}};

constexpr Rgb kInk{30, 30, 30};
constexpr Rgb kFrame{120, 120, 120};
constexpr Rgb kMissing{160, 160, 160};  // NaN cells
constexpr int kLabelPixels = 12;
constexpr int kTitlePixels = 15;
constexpr int kGap = 6;

template <std::size_t N>
Rgb interpolate(const std::array<Rgb, N>& stops, double t) {
  t = std::clamp(std::isnan(t) ? 0.0 : t, 0.0, 1.0) * static_cast<double>(N - 1);
  const auto i = std::min(static_cast<std::size_t>(t), N - 2);
  const double f = t - static_cast<double>(i);
  const auto mix = [f](std::uint8_t a, std::uint8_t b) {
    return static_cast<std::uint8_t>(std::lround(a + (b - a) * f));
  };
  return {mix(stops[i].r, stops[i + 1].r), mix(stops[i].g, stops[i + 1].g), mix(stops[i].b, stops[i + 1].b)};
}

std::string format_value(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", std::abs(v) < 1e-12 ? 0.0 : v);
  return text;
}

// Which of n labels to show when each gets `pixels` and a label needs `needed`: every
// step-th, step from 1, 2, 5, 10, 20, 50, ...
std::int64_t label_step(std::int64_t n, double pixels, int needed) {
  for (std::int64_t base = 1;; base *= 10)
    for (const std::int64_t m : {1, 2, 5}) {
      const std::int64_t step = base * m;
      if (step * pixels >= needed || step >= n) return step;
    }
}

struct Range {
  double lo = 0, hi = 1;
  bool diverging = false;
  double t(double v) const { return (v - lo) / (hi - lo); }
};

Range colour_range(std::span<const HeatmapPanel> panels, const HeatmapOptions& options) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const HeatmapPanel& p : panels)
    for (std::int64_t r = 0; r < p.values.rows(); ++r)
      for (const float v : p.values.row(r))
        if (std::isfinite(v)) {
          lo = std::min<double>(lo, v);
          hi = std::max<double>(hi, v);
        }
  if (!std::isfinite(lo)) lo = 0, hi = 1;  // nothing finite: every cell is drawn as missing
  lo = options.min.value_or(lo);
  hi = options.max.value_or(hi);
  Range range;
  range.diverging = options.scale == ColourScale::Diverging || (options.scale == ColourScale::Auto && lo < 0 && hi > 0);
  if (range.diverging) {
    const double m = std::max(std::abs(lo), std::abs(hi));
    lo = -m, hi = m;
  }
  if (!(hi > lo)) {  // one value everywhere: centre it in a unit range
    lo -= 0.5;
    hi += 0.5;
  }
  range.lo = lo;
  range.hi = hi;
  return range;
}

}  // namespace

std::string label_text(const std::string& piece) {
  static constexpr std::string_view kMarker = "\u2581";  // ▁, SentencePiece's word start
  if (piece == kMarker) return " ";
  std::string text;
  for (std::size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kMarker.size(), kMarker) == 0) {
      if (i > 0) text += ' ';
      i += kMarker.size();
    } else {
      text += piece[i++];
    }
  }
  return text;
}

namespace {

// The pixel geometry of one panel.
struct PanelLayout {
  int plot_w = 0, plot_h = 0;
  std::int64_t row_step = 1, col_step = 1;  // every step-th label is drawn
  bool col_labels_up = false;        // token columns: labels turned up
  int left = 0;                      // axis title + row labels
  int top = 0;                       // panel title
  int bottom = 0;                    // column labels + axis title
};

std::string row_label(const HeatmapPanel& p, std::int64_t r) {
  return p.row_labels.empty() ? std::to_string(r) : label_text(p.row_labels[static_cast<std::size_t>(r)]);
}
// The first column to label: numbered columns are labelled at multiples of the step
// (-60, -50, ..., 0, ... rather than -63, -53, ...).
std::int64_t first_labelled_col(const HeatmapPanel& p, std::int64_t step) {
  return p.col_labels.empty() ? ((-p.first_col_number) % step + step) % step : 0;
}
std::string col_label(const HeatmapPanel& p, std::int64_t c) {
  return p.col_labels.empty() ? std::to_string(c + p.first_col_number)
                              : label_text(p.col_labels[static_cast<std::size_t>(c)]);
}

PanelLayout lay_out(const HeatmapPanel& p, int target, const Font& label, const Font& title) {
  const std::int64_t rows = p.values.rows(), cols = p.values.cols();
  PanelLayout l;
  // Cells fill a target box; labelled matrices (tokens on both axes) keep square cells.
  int cell_w = std::clamp(static_cast<int>(target / cols), 1, 48);
  int cell_h = std::clamp(static_cast<int>(target / rows), 1, 48);
  if (!p.row_labels.empty() && !p.col_labels.empty()) cell_w = cell_h = std::min(cell_w, cell_h);
  // Beyond 1600 pixels a side, several cells share a pixel (nearest cell is drawn).
  l.plot_w = static_cast<int>(std::min<std::int64_t>(cols * cell_w, 1600));
  l.plot_h = static_cast<int>(std::min<std::int64_t>(rows * cell_h, 1600));
  const double px_col = static_cast<double>(l.plot_w) / static_cast<double>(cols);
  const double px_row = static_cast<double>(l.plot_h) / static_cast<double>(rows);
  l.row_step = label_step(rows, px_row, label.line_height());
  l.col_labels_up = !p.col_labels.empty();
  int widest_col = 0, widest_row = 0;
  const int widest_number = std::max(label.width(col_label(p, 0)), label.width(col_label(p, cols - 1)));
  l.col_step = label_step(cols, px_col, l.col_labels_up ? label.line_height() : widest_number + 8);
  for (std::int64_t c = first_labelled_col(p, l.col_step); c < cols; c += l.col_step) widest_col = std::max(widest_col, label.width(col_label(p, c)));
  for (std::int64_t r = 0; r < rows; r += l.row_step) widest_row = std::max(widest_row, label.width(row_label(p, r)));
  const int axis_title = p.row_axis.empty() ? 0 : label.line_height() + kGap;
  l.left = axis_title + widest_row + kGap + 4;
  l.top = p.title.empty() ? kGap : title.line_height() + kGap;
  l.bottom = 4 + kGap + (l.col_labels_up ? widest_col : label.line_height()) +
             (p.col_axis.empty() ? 0 : kGap + label.line_height()) + kGap;
  return l;
}

void check_panel(const HeatmapPanel& p, std::size_t index) {
  const std::string where = "heatmap panel " + std::to_string(index) + (p.title.empty() ? "" : " (" + p.title + ")");
  if (p.values.rows() == 0 || p.values.cols() == 0) throw Error(where, "has no values");
  if (!p.row_labels.empty() && static_cast<std::int64_t>(p.row_labels.size()) != p.values.rows())
    throw Error(where, std::to_string(p.row_labels.size()) + " row labels for " + std::to_string(p.values.rows()) +
                           " rows");
  if (!p.col_labels.empty() && static_cast<std::int64_t>(p.col_labels.size()) != p.values.cols())
    throw Error(where, std::to_string(p.col_labels.size()) + " column labels for " +
                           std::to_string(p.values.cols()) + " columns");
}

// Draws panel p with its plot's top-left at (x0, y0) and its labels around it.
// Writes each value in its cell, dark on light colours and white on dark ones, when
// every cell has room for its text.
void write_values(Image& image, const HeatmapPanel& p, const PanelLayout& l, const Range& range, int x0, int y0,
                  int decimals, const Font& label) {
  const std::int64_t rows = p.values.rows(), cols = p.values.cols();
  const int cell_w = l.plot_w / static_cast<int>(cols), cell_h = l.plot_h / static_cast<int>(rows);
  const auto text_of = [decimals](float v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.*f", decimals, static_cast<double>(v));
    return std::string(text);
  };
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      if (label.width(text_of(p.values(r, c))) + 4 > cell_w || label.line_height() + 2 > cell_h) return;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = p.values(r, c);
      const Rgb under = std::isfinite(v) ? colour_of(range.t(v), range.diverging) : kMissing;
      const bool light = 0.299 * under.r + 0.587 * under.g + 0.114 * under.b > 140;
      const std::string text = text_of(v);
      label.draw(image, x0 + static_cast<int>(c) * cell_w + (cell_w - label.width(text)) / 2,
                 y0 + static_cast<int>(r) * cell_h + (cell_h - label.line_height()) / 2, text,
                 light ? kInk : Rgb{255, 255, 255});
    }
}

void draw_panel(Image& image, const HeatmapPanel& p, const PanelLayout& l, const Range& range, int x0, int y0,
                const Font& label, const Font& title) {
  const std::int64_t rows = p.values.rows(), cols = p.values.cols();
  for (int y = 0; y < l.plot_h; ++y) {
    const std::int64_t r = std::min<std::int64_t>(rows - 1, static_cast<std::int64_t>(y) * rows / l.plot_h);
    for (int x = 0; x < l.plot_w; ++x) {
      const std::int64_t c = std::min<std::int64_t>(cols - 1, static_cast<std::int64_t>(x) * cols / l.plot_w);
      const float v = p.values(r, c);
      image.set(x0 + x, y0 + y, std::isfinite(v) ? colour_of(range.t(v), range.diverging) : kMissing);
    }
  }
  image.outline_rect(x0 - 1, y0 - 1, l.plot_w + 2, l.plot_h + 2, kFrame);
  if (!p.title.empty())
    title.draw(image, x0 + (l.plot_w - title.width(p.title)) / 2, y0 - l.top, p.title, kInk);

  // Row labels, right-aligned against the plot, centred on their rows.
  const double px_row = static_cast<double>(l.plot_h) / static_cast<double>(rows);
  for (std::int64_t r = 0; r < rows; r += l.row_step) {
    const std::string text = row_label(p, r);
    const int centre = y0 + static_cast<int>((static_cast<double>(r) + 0.5) * px_row);
    image.fill_rect(x0 - 5, centre, 4, 1, kFrame);
    label.draw(image, x0 - 7 - label.width(text), centre - label.line_height() / 2, text, kInk);
  }
  if (!p.row_axis.empty())
    label.draw_up(image, x0 - l.left, y0 + (l.plot_h + label.width(p.row_axis)) / 2, p.row_axis, kInk);

  // Column labels under the plot: tokens turned up and ending at the plot, numbers level.
  const double px_col = static_cast<double>(l.plot_w) / static_cast<double>(cols);
  const int below = y0 + l.plot_h + 4;
  int lowest = below + label.line_height();
  for (std::int64_t c = first_labelled_col(p, l.col_step); c < cols; c += l.col_step) {
    const std::string text = col_label(p, c);
    const int centre = x0 + static_cast<int>((static_cast<double>(c) + 0.5) * px_col);
    image.fill_rect(centre, y0 + l.plot_h + 1, 1, 4, kFrame);
    if (l.col_labels_up) {
      const int w = label.width(text);
      label.draw_up(image, centre - label.line_height() / 2, below + kGap / 2 + w, text, kInk);
      lowest = std::max(lowest, below + kGap / 2 + w);
    } else {
      label.draw(image, centre - label.width(text) / 2, below, text, kInk);
    }
  }
  if (!p.col_axis.empty())
    label.draw(image, x0 + (l.plot_w - label.width(p.col_axis)) / 2, lowest + kGap, p.col_axis, kInk);
}

// The colour bar right of the panels: bar, five ticks with values, caption turned up.
int legend_width(const Range& range, const HeatmapOptions& options, const Font& label) {
  int widest = 0;
  for (int i = 0; i <= 4; ++i) widest = std::max(widest, label.width(format_value(range.lo + (range.hi - range.lo) * i / 4)));
  return kGap * 2 + 18 + 6 + widest + kGap + (options.value_label.empty() ? 0 : label.line_height() + kGap);
}

void draw_legend(Image& image, const Range& range, const HeatmapOptions& options, int x0, int y0, int height,
                 const Font& label) {
  const int bar_x = x0 + kGap * 2;
  for (int y = 0; y < height; ++y) {
    const double t = 1.0 - static_cast<double>(y) / std::max(1, height - 1);  // high values on top
    image.fill_rect(bar_x, y0 + y, 18, 1, colour_of(t, range.diverging));
  }
  image.outline_rect(bar_x - 1, y0 - 1, 20, height + 2, kFrame);
  int widest = 0;
  for (int i = 0; i <= 4; ++i) {
    const double value = range.lo + (range.hi - range.lo) * i / 4;
    const int y = y0 + height - 1 - (height - 1) * i / 4;
    image.fill_rect(bar_x + 18, y, 4, 1, kFrame);
    const std::string text = format_value(value);
    label.draw(image, bar_x + 18 + 6, y - label.line_height() / 2, text, kInk);
    widest = std::max(widest, label.width(text));
  }
  if (!options.value_label.empty())
    label.draw_up(image, bar_x + 18 + 6 + widest + kGap, y0 + (height + label.width(options.value_label)) / 2,
                  options.value_label, kInk);
}

}  // namespace

Rgb colour_of(double t, bool diverging) {
  return diverging ? interpolate(kBlueWhiteRed, t) : interpolate(kViridis, t);
}

Image render_heatmaps(std::span<const HeatmapPanel> panels, const HeatmapOptions& options) {
  if (panels.empty()) throw Error("heatmap", "nothing to draw");
  for (std::size_t i = 0; i < panels.size(); ++i) check_panel(panels[i], i);
  const std::filesystem::path font_file = find_label_font();
  const Font label(font_file, kLabelPixels);
  const Font title(font_file, kTitlePixels);
  const Range range = colour_range(panels, options);

  const int count = static_cast<int>(panels.size());
  const int columns = std::clamp(options.columns > 0 ? options.columns : std::min(count, 4), 1, count);
  const int grid_rows = (count + columns - 1) / columns;
  const int target = count == 1 ? 640 : columns <= 2 ? 420 : 300;
  // Every panel gets the largest panel's box, its plot at the same offset inside it,
  // so the grid lines up.
  std::vector<PanelLayout> layouts;
  PanelLayout box;
  for (const HeatmapPanel& p : panels) {
    layouts.push_back(lay_out(p, target, label, title));
    const PanelLayout& l = layouts.back();
    box.plot_w = std::max(box.plot_w, l.plot_w);
    box.plot_h = std::max(box.plot_h, l.plot_h);
    box.left = std::max(box.left, l.left);
    box.top = std::max(box.top, l.top);
    box.bottom = std::max(box.bottom, l.bottom);
  }
  const int box_w = box.left + box.plot_w + kGap * 3;
  const int box_h = box.top + box.plot_h + box.bottom;
  const int heading = options.title.empty() ? kGap : title.line_height() + kGap * 2;
  const int width = kGap + columns * box_w + legend_width(range, options, label) + kGap;
  const int height = heading + grid_rows * box_h + kGap;

  Image image(width, height);
  if (!options.title.empty()) title.draw(image, kGap * 2, kGap, options.title, kInk);
  for (int i = 0; i < count; ++i) {
    const int x0 = kGap + (i % columns) * box_w + box.left;
    const int y0 = heading + (i / columns) * box_h + box.top;
    const HeatmapPanel& panel = panels[static_cast<std::size_t>(i)];
    const PanelLayout& layout = layouts[static_cast<std::size_t>(i)];
    draw_panel(image, panel, layout, range, x0, y0, label, title);
    if (options.cell_decimals >= 0) write_values(image, panel, layout, range, x0, y0, options.cell_decimals, label);
  }
  draw_legend(image, range, options, kGap + columns * box_w, heading + box.top, box.plot_h, label);
  return image;
}

}  // namespace ordo::tools
