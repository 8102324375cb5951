// Matrices as pictures: one or more heatmap panels in a grid, axes labelled (with
// tokens or numbered ticks), one colour scale shared by every panel so they compare,
// and a legend of its value range.
//
// Colours: viridis (dark blue -> yellow, even in lightness, readable in grey and by
// most colour-blind readers) for values of one sign, such as probabilities; a diverging
// blue-white-red map centred on 0 for signed values (sin/cos tables, cosines), so 0 is
// white and the sign is the hue.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tools/viz/grid.h"
#include "tools/viz/png_image.h"

namespace ordo::tools {

struct HeatmapPanel {
  std::string title;                    // above the panel; may be empty
  Grid values;                          // [rows, cols]; row 0 at the top
  std::vector<std::string> row_labels;  // one per row (tokens), or empty: rows numbered from 0
  std::vector<std::string> col_labels;  // one per column, or empty: columns numbered from 0
  std::string row_axis;                 // what the rows are ("position", "query token")
  std::string col_axis;                 // what the columns are ("dimension", "key token")
  std::int64_t first_col_number = 0;           // numbered columns start here (relative positions: -(L-1))
};

enum class ColourScale {
  Auto,        // Diverging when the values have both signs, else Sequential
  Sequential,  // viridis from min to max
  Diverging,   // blue (-m) - white (0) - red (+m), m = max(|min|, |max|)
};

struct HeatmapOptions {
  std::string title;                      // over the whole picture; may be empty
  std::string value_label = "value";      // the legend's caption
  int columns = 0;                        // panels per row; 0: up to 4 per row
  std::optional<double> min, max;         // the colour range; default: the panels' values
  ColourScale scale = ColourScale::Auto;
  // >= 0: each value written in its cell with this many decimals, wherever the cells
  // are big enough for it (small matrices: tokens x tokens). -1: colours only.
  int cell_decimals = -1;
};

// A token label as a picture shows it: SentencePiece's word-start marker ▁ (U+2581)
// dropped at the start and a space inside ("▁New▁York" -> "New York"), so it is not
// drawn as a stray bar; "▁" alone is a space. Other text is kept. (A CSV keeps pieces.)
std::string label_text(const std::string& piece);

// Draws the panels (at least one, none empty). Labels need a font (font.h); throws
// Error when there is none, or when a panel's labels do not match its shape.
Image render_heatmaps(std::span<const HeatmapPanel> panels, const HeatmapOptions& options);

// The colour of t in [0, 1] (clamped) on a sequential or diverging map.
Rgb colour_of(double t, bool diverging);

}  // namespace ordo::tools
