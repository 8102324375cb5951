#include "tools/viz/viz_output.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "ordo/error.hpp"
#include "tools/viz/png_image.h"

namespace ordo::tools {

namespace {

std::string csv_field(const std::string& text) {
  const bool plain = text.find_first_of(",\"\n\r") == std::string::npos && !text.empty() && text.front() != ' ' &&
                     text.back() != ' ';
  if (plain) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string csv_number(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(value));
  return text;
}

}  // namespace

VizFormat viz_format(const std::string& path, const std::string& flag) {
  std::string extension = std::filesystem::path(path).extension().string();
  std::ranges::transform(extension, extension.begin(), [](unsigned char c) { return std::tolower(c); });
  if (extension == ".png") return VizFormat::Png;
  if (extension == ".csv") return VizFormat::Csv;
  throw OptionError(flag, "'" + path + "' ends in '" + extension +
                              "': name a .png file for a picture or a .csv file for the numbers");
}

void write_csv(const std::filesystem::path& path, std::span<const HeatmapPanel> panels) {
  std::ofstream out(path);
  if (!out)
    throw Error(path.string(), std::string("cannot write the CSV: ") + std::strerror(errno),
                "check that the directory exists and is writable");
  const bool titled = panels.size() > 1;
  for (const HeatmapPanel& p : panels) {
    const std::string prefix = titled ? csv_field(p.title) + "," : "";
    if (!p.col_labels.empty()) {
      out << prefix << (p.row_labels.empty() ? "" : ",");
      for (std::size_t c = 0; c < p.col_labels.size(); ++c) out << (c > 0 ? "," : "") << csv_field(p.col_labels[c]);
      out << '\n';
    }
    for (std::int64_t r = 0; r < p.values.rows(); ++r) {
      out << prefix;
      if (!p.row_labels.empty()) out << csv_field(p.row_labels[static_cast<std::size_t>(r)]) << ',';
      for (std::int64_t c = 0; c < p.values.cols(); ++c) out << (c > 0 ? "," : "") << csv_number(p.values(r, c));
      out << '\n';
    }
  }
  out.flush();
  if (!out) throw Error(path.string(), "writing the CSV failed", "is the disk full?");
}

void write_picture(const std::filesystem::path& path, std::span<const HeatmapPanel> panels,
                   const HeatmapOptions& options) {
  if (viz_format(path.string()) == VizFormat::Csv)
    write_csv(path, panels);
  else
    write_png(render_heatmaps(panels, options), path);
}

}  // namespace ordo::tools
