// ordo quantize: a model directory rewritten with its weight matrices in another format
// (ordo::quantize_model, <ordo/quantize.hpp>).
//
//   ordo quantize --model weights/sinusoidal --out sinusoidal-int8 --type int8
//   ordo translate --model sinusoidal-int8 "cats chase dogs"
#include <csignal>
#include <iostream>
#include <memory>
#include <string>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/stop_signals.h"

namespace ordo::tools {

namespace {

struct QuantizeCommandOptions {
  CommonOptions common;
  std::string out;
  std::string type;
  int group_size = -1;
};

void run_quantize(const QuantizeCommandOptions& options) {
  set_threads(options.common.threads);  // the matrices convert on every thread
  QuantizeOptions quantize;
  quantize.type = parse_compute_type(options.type);
  quantize.group_size = options.group_size;
  // No --model and no default found: the lookup's own error says where it looked.
  if (options.common.model_dir.empty() && !options.common.default_found) default_model_directory();
  // SIGINT and SIGTERM stop the pass between tensors; it removes what it wrote, and ordo
  // then ends by the signal, as an interrupted program does (exit status 128 + its number).
  StopSignals signals;
  signals.unblock_here();  // nothing in this thread must run uninterrupted
  quantize.stop_requested = [&signals] { return signals.count() > 0; };
  QuantizeReport report;
  try {
    report = quantize_model(options.common.model_dir, options.out, quantize);
  } catch (const Error&) {
    if (signals.count() == 0) throw;
    std::cerr << "ordo: " << printable(options.out) << ": stopped by " << signals.first_name()
              << " before it was complete; nothing was written\n";
    std::signal(signals.first(), SIG_DFL);
    std::raise(signals.first());
    throw;  // not reached: the default action ends the process
  }
  const nlohmann::json summary = {{"input", options.common.model_dir},
                                  {"output", options.out},
                                  {"type", options.type},
                                  {"group_size", report.group_size},
                                  {"matrices", report.matrices},
                                  {"int8_fallbacks", report.int8_fallbacks},
                                  {"tensors", report.tensors},
                                  {"bytes_in", report.bytes_in},
                                  {"bytes_out", report.bytes_out},
                                  {"copied_files", report.copied_files}};
  if (options.common.json) return print_json_line(summary);
  std::cout << "wrote " << printable(options.out) << ": " << report.matrices << " weight matrices";
  if (quantize.type == ComputeType::Int4) {
    std::cout << ", " << report.matrices - report.int8_fallbacks << " as int4 in groups of " << report.group_size;
    if (report.int8_fallbacks > 0)
      std::cout << " and " << report.int8_fallbacks << " as int8 with a scale per row (their widths are not a multiple of "
                << report.group_size << (report.int8_fallbacks == report.matrices ? "; none is: this is the int8 model" : "")
                << ")";
  } else {
    std::cout << " as " << options.type;
    if (quantize.type == ComputeType::Int8)
      std::cout << (report.group_size > 0 ? " in groups of " + std::to_string(report.group_size) : " with a scale per row");
  }
  std::cout << ", " << report.tensors << " tensors, " << report.bytes_out << " bytes (from " << report.bytes_in
            << ")\n";
}

}  // namespace

void setup_quantize(CLI::App& app) {
  auto options = std::make_shared<QuantizeCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "quantize",
      "Write a model directory with its weight matrices (linear layers, embeddings, output head) in\n"
      "another format: f16 or bf16 (2 bytes a weight), int8 (1 byte, a float32 scale per row or group)\n"
      "or int4 (half a byte, an f16 scale per group of 32; a matrix whose width is not a multiple of\n"
      "the group size is int8 with a scale per row instead). Norms and biases stay as they are. The\n"
      "result runs as stored, exactly as --compute-type TYPE runs the original. Example:\n"
      "  ordo quantize --model weights/sinusoidal --out sinusoidal-int8 --type int8");
  add_common_options(*command, options->common);
  command->remove_option(command->get_option("--rope-scaling"));
  command->remove_option(command->get_option("--compute-type"));
  command->remove_option(command->get_option("--group-size"));  // its own below: of the type written
  command->add_option("--out", options->out, "The directory to write (new, or empty)")->required()->type_name("DIR");
  command->add_option("--type", options->type, "The format of the weight matrices")
      ->required()
      ->check(CLI::IsMember({"f32", "f16", "bf16", "int8", "int4"}));
  command
      ->add_option("--group-size", options->group_size,
                   "Weights per scale: int8 0 (one per row, the default) or any size dividing the rows; int4 a "
                   "multiple of 32 (default 32)")
      ->check(CLI::Range(0, kMaxGroupSizeFlag));
  command->callback([options] { run_quantize(*options); });
}

}  // namespace ordo::tools
