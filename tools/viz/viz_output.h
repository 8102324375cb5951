// Where `ordo viz` and `ordo compare --plot` put what they draw: a PNG picture or, for
// a .csv file, the numbers behind it.
#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "tools/viz/heatmap.h"

namespace ordo::tools {

enum class VizFormat { Png, Csv };

// The format the path's extension asks for (.png or .csv, any case). Throws
// OptionError naming `flag` for any other.
VizFormat viz_format(const std::string& path, const std::string& flag = "--out");

// The panels' values as CSV, full float precision ("%.9g"). A panel's column labels,
// if any, make a header line before its rows, and its row labels the first cell of
// each row; with several panels every line starts with the panel's title. One
// unlabelled panel (a position table) is therefore just its numbers, a row per line.
// Throws Error naming the path when it cannot be written.
void write_csv(const std::filesystem::path& path, std::span<const HeatmapPanel> panels);

// Draws the panels (render_heatmaps) or writes their numbers, as the path's extension
// says.
void write_picture(const std::filesystem::path& path, std::span<const HeatmapPanel> panels,
                   const HeatmapOptions& options);

}  // namespace ordo::tools
