// ordo viz: pictures of what a model computes.
//
//   ordo viz pe --scheme sinusoidal --length 64 --dim 128 --out pe.png
//   ordo viz pe --scheme learned --model weights/learned --out learned.csv
//
// `viz pe` draws a position scheme's table, position by dimension, with the engine's
// own position classes (tools/viz/position_pictures.h lists the schemes). `viz attention`
// (command_viz_attention.cpp) draws attention weights. A .png out file gets a heatmap
// with a legend; a .csv out file the numbers.
#include <algorithm>
#include <iostream>
#include <limits>
#include <optional>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/viz/position_pictures.h"
#include "tools/viz/viz_output.h"

namespace ordo::tools {

namespace {

struct PeOptions {
  CommonOptions common;
  std::string scheme = "sinusoidal";
  std::int64_t length = 0;
  std::int64_t dim = 0;
  std::int64_t heads = 0;
  std::string stack = "encoder";
  std::string out;
};

// What was written, for the terminal or --json.
void report(const PeOptions& options, const PositionPicture& picture, bool json) {
  const HeatmapPanel& panel = picture.panels.front();
  const Grid& values = panel.values;
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (std::int64_t r = 0; r < values.rows(); ++r)
    for (const float v : values.row(r)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (json) {
    print_json_line({{"out", options.out},
                     {"scheme", options.scheme},
                     {"rows", values.rows()},
                     {"columns", values.cols()},
                     {"row_axis", panel.row_axis},
                     {"column_axis", panel.col_axis},
                     {"min", lo},
                     {"max", hi}});
    return;
  }
  std::cout << "wrote " << options.out << ": " << panel.title << ", " << values.rows() << " x " << values.cols()
            << " (" << panel.row_axis << " x " << panel.col_axis << "), values " << lo << " to " << hi << '\n';
}

void run_pe(const PeOptions& options, const CLI::App& command) {
  viz_format(options.out);  // a bad extension is a usage error before any work
  const PositionScheme& scheme = position_scheme(options.scheme);
  // The model is read when the scheme needs one, or when --model asks for its settings;
  // $ORDO_MODEL alone does not change a sinusoidal or rope picture.
  const bool chosen = scheme.needs_model ? !uses_builtin_model(command, options.common) : given(command, "--model");
  if (scheme.needs_model && !chosen)
    throw CLI::ValidationError("--model", "--scheme " + scheme.name +
                                              " reads a model's trained table: give --model DIR (e.g. weights/" +
                                              scheme.name + ")");
  // A scheme's own table has no weights to convert: without a model the flags would do
  // nothing, silently.
  for (const char* flag : {"--compute-type", "--group-size"})
    if (!chosen && given(command, flag))
      throw CLI::ValidationError(flag, std::string("converts a model's weights: it draws only with --model DIR (--scheme ") +
                                           scheme.name + " draws its own table without one)");
  if (!options.common.rope_scaling.empty() && scheme.name != "rope")
    throw CLI::ValidationError("--rope-scaling", "scales RoPE: it draws only with --scheme rope");
  std::optional<Model> model;
  std::optional<Model> plain_model;  // --rope-scaling with a model: drawn beside the scaled one
  if (chosen) model = load_model(options.common);
  if (chosen && !options.common.rope_scaling.empty()) plain_model = Model::load(options.common.model_dir, quiet);
  PositionPictureRequest request;
  request.length = options.length;
  request.dim = options.dim;
  request.heads = options.heads;
  request.model = model ? &*model : nullptr;
  request.stack = options.stack == "decoder" ? Stack::Decoder : Stack::Encoder;
  request.rope_scaling = options.common.rope_scaling;
  request.plain_model = plain_model ? &*plain_model : nullptr;
  const PositionPicture picture = scheme.draw(request);
  HeatmapOptions style;
  style.value_label = picture.value_label;
  write_picture(options.out, picture.panels, style);
  report(options, picture, options.common.json);
}

void setup_pe(CLI::App& viz) {
  auto options = std::make_shared<PeOptions>();
  std::string schemes, names;
  std::vector<std::string> known;
  for (const PositionScheme& s : position_schemes()) {
    schemes += "\n  " + s.name + ": " + s.about;
    known.push_back(s.name);
  }
  CLI::App* command = viz.add_subcommand(
      "pe",
      "Draw a position scheme as a heatmap (--out FILE.png, with a legend of the value\n"
      "range), or write its numbers (--out FILE.csv, comma-separated): a position x dimension\n"
      "table for the schemes that add or rotate, a head x relative position bias for those\n"
      "that bias attention scores. Schemes:" +
          schemes +
          "\nExample: ordo viz pe --scheme sinusoidal --length 64 --dim 128 --out pe.png");
  command->add_option("--scheme", options->scheme, "Position scheme")
      ->check(CLI::IsMember(known))
      ->capture_default_str();
  command->add_option("--length", options->length,
                      "Positions to show (default: 64, or the whole table of a learned model; alibi and\n"
                      "t5_relative: relative positions up to L-1 either side of the query)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{4096}));
  command->add_option("--dim", options->dim,
                      "Width (default: 128; rope: the head width, 32; with --model, the model's own)")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{65536}));
  command->add_option("--heads", options->heads, "Heads of a score-bias scheme (alibi; default: 8, or --model's)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1024}));
  command->add_option("--stack", options->stack,
                      "Which stack of a model: encoder or decoder (learned, t5_relative: its table; alibi: causal)")
      ->check(CLI::IsMember({"encoder", "decoder"}))
      ->capture_default_str();
  command->add_option("-o,--out", options->out, "Where to write: FILE.png (picture) or FILE.csv (numbers)")
      ->type_name("FILE")
      ->required();
  add_common_options(*command, options->common);
  command->remove_option(command->get_option("--threads"));  // a table of positions: nothing to compute in parallel
  command->callback([options, command] { run_pe(*options, *command); });
}

}  // namespace

void setup_viz_attention(CLI::App& viz);

void setup_viz(CLI::App& app) {
  CLI::App* viz = app.add_subcommand(
      "viz", "Pictures: position schemes (viz pe) and attention weights (viz attention), as PNG or CSV");
  viz->require_subcommand(1);
  setup_pe(*viz);
  setup_viz_attention(*viz);
}

}  // namespace ordo::tools
