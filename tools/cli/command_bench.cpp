// ordo bench: how fast this machine runs a model, and how fast it could.
//
//   ordo bench --model DIR --batch 16 --src-len 32 --new-tokens 32 --threads 2
//   ordo bench --shape base --batch 1 --src-len 32 --new-tokens 32 --threads 1 --json
//   ordo bench --shape llama --batch 1 --src-len 32 --new-tokens 32 --threads 2
//   ordo bench --list-shapes [--json]
//
// This file is the command: its flags, the checks that need the model, and the order of
// a run. The parts are in tools/cli/bench/:
//   shapes.h          the --shape models' configs (read by tools/bench/*.py via --list-shapes)
//   random_model.h    a shape's random model, written through models/safetensors.h
//   random_numbers.h  the deterministic source ids and weight values, shared with the peer
//   workload.h        the timed work: encode (or prefill) and exactly N decode steps,
//                     through the library's DecodeSession
//   next_tokens.h     its greedy or beam choice of the next tokens
//   probes.h          the machine: sgemm GFLOP/s, streaming GB/s, peak RSS
//   report.h          the JSON object and the table
//   options.h, timing.h  what a run is asked to do; its clock and the median it reports
// Every engine runs the same workload on the same numbers: tools/bench/bench_peer.py in
// PyTorch, and tools/bench/bench.sh runs both side by side. Like every command, it uses
// the public API alone: the costs it reports are the model's own (Model::decode_step_bytes,
// Model::encode_flops), its random models are written with ordo/model_files.hpp.
//
// A run: the model is loaded warmup + repeats times (timed; a --shape model is written
// to a private directory first and unlinked after the last load, its mapping staying
// valid), the workload runs warmup + repeats times, the peak RSS is read, then the
// probes run; the medians of the measured runs are reported.
#include <memory>
#include <optional>
#include <string>

#include "tools/cli/bench/options.h"
#include "tools/cli/bench/probes.h"
#include "tools/cli/bench/random_model.h"
#include "tools/cli/bench/report.h"
#include "tools/cli/bench/shapes.h"
#include "tools/cli/bench/timing.h"
#include "tools/cli/bench/workload.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace ordo::tools {

namespace {

namespace fs = std::filesystem;
using namespace bench;

// Loads the model warmup + repeats times, timing each (directory open to ready) into
// `load_s`; returns the last. Load warnings are printed once.
Model timed_loads(const fs::path& dir, const BenchOptions& options, std::vector<double>& load_s) {
  std::optional<Model> model;
  for (int i = 0; i < options.runs(); ++i) {
    model.reset();  // one model at a time: the peak RSS is one model's
    const auto start = Clock::now();
    model = Model::load(dir, load_options(options.rope_scaling, options.compute_type, options.group_size),
                        i == 0 ? Model::WarningHandler() : [](const std::string&) {});
    if (i >= options.warmup) load_s.push_back(seconds_since(start));
  }
  return std::move(*model);
}

// Lengths the model cannot run are usage errors naming the flag.
void check_lengths(const Model& model, const BenchOptions& options) {
  if (model.is_decoder_only()) {
    const int most = model.max_output_tokens();
    if (options.src_len + options.new_tokens > most)
      throw CLI::ValidationError("--src-len/--new-tokens", "a prompt of " + std::to_string(options.src_len) + " plus " +
                                                               std::to_string(options.new_tokens) + " new tokens is more than the " +
                                                               std::to_string(most) + " positions this model has");
  } else {
    const int source_most = model.max_input_tokens();
    if (options.src_len > source_most)
      throw CLI::ValidationError("--src-len", std::to_string(options.src_len) + " is more than the " +
                                                  std::to_string(source_most) + " source positions this model has");
    const int target_most = model.max_output_tokens();
    if (options.new_tokens > target_most)
      throw CLI::ValidationError("--new-tokens", std::to_string(options.new_tokens) + " is more than the " +
                                                     std::to_string(target_most) + " target positions this model has");
  }
  if (options.beam > model.vocabulary_size())
    throw CLI::ValidationError("--beam", std::to_string(options.beam) + " is more than the " +
                                             std::to_string(model.vocabulary_size()) + " tokens of the vocabulary");
}

const BenchShape& shape_named(const std::string& name) {
  const BenchShape* shape = find_bench_shape(name);
  if (shape == nullptr)  // --shape's check admits only known names
    throw Error("--shape", "'" + name + "' is not a known shape", "known: " + bench_shape_names(", "));
  return *shape;
}

void run_bench(const BenchOptions& options) {
  set_threads(options.threads);
  Measurements measured;
  std::optional<Model> model;
  {
    std::optional<ScratchModel> scratch;
    if (!options.shape.empty()) scratch.emplace(shape_named(options.shape));
    model = timed_loads(scratch ? scratch->dir() : fs::path(options.model_dir), options, measured.load_s);
    measured.compute_type = model->info().compute_type;  // info() reads the directory
  }  // a scratch directory is gone now; its mapping stays valid
  check_lengths(*model, options);
  measured.decode_weight_bytes = model->decode_step_bytes();
  measured.encode_flops = model->encode_flops(options.batch, options.src_len);
  WorkloadTimes workload = measure_workload(*model, options);
  measured.encode_s = std::move(workload.encode_s);
  measured.decode_s = std::move(workload.decode_s);
  measured.sample_ids = std::move(workload.sample_ids);
  measured.peak_rss_mb = peak_rss_mb();  // before the probes' buffers
  MachineRates machine = probe_machine(options);
  measured.bandwidth_gbs = std::move(machine.bandwidth_gbs);
  measured.gemm_gflops = std::move(machine.gemm_gflops);

  const std::string name = options.shape.empty() ? options.model_dir : options.shape + " (random, in memory)";
  const nlohmann::json report = report_json(name, model->is_decoder_only(), options, measured);
  if (options.json)
    print_json_line(report);
  else
    print_table(report, std::cout);
}

void list_shapes(bool json) {
  if (!json) return print_shapes_table(std::cout);
  for (const BenchShape& shape : bench_shapes()) print_json_line(describe_shape(shape));
}

// --shape's help, from the shapes themselves.
std::string shape_help() {
  std::string text = "A random model of this shape instead of --model (decoder-only: --src-len is the prompt):";
  for (const BenchShape& shape : bench_shapes()) {
    const nlohmann::json about = describe_shape(shape);
    text += "\n  " + shape.name + ": " + about["kind"].get<std::string>() + ", " +
            with_thousands(about["parameters"].get<std::int64_t>()) + " parameters";
  }
  return text + "\n(--list-shapes describes them)";
}

}  // namespace

void setup_bench(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* command = app.add_subcommand(
      "bench",
      "Measure load, encode and decode speed on a fixed random batch (exactly --new-tokens\n"
      "decoder steps, eos ignored), next to this machine's sgemm rate and memory bandwidth.\n"
      "Give --model DIR, or --shape for a random model built in memory: " + bench_shape_names(" or ") +
      "\n(--list-shapes describes them).");
  const auto positive = CLI::Range(1, 1 << 20);
  auto* model = command
                    ->add_option("-m,--model", options->model_dir,
                                 "Model directory to measure, or a shipped model's name")
                    ->transform(shipped_model_transform())
                    ->type_name("DIR");
  add_rope_scaling_option(*command, options->rope_scaling);
  add_compute_type_options(*command, options->compute_type, options->group_size);
  auto* shape = command->add_option("--shape", options->shape, shape_help())
                    ->check(CLI::Validator(
                        [](const std::string& s) {
                          return find_bench_shape(s) != nullptr
                                     ? ""
                                     : "'" + s + "' is not a known shape (known: " + bench_shape_names(", ") + ")";
                        },
                        bench_shape_names("|")))
                    ->excludes(model);
  command->add_flag("--list-shapes", options->list_shapes,
                    "Print the --shape models (name, kind, parameters, dimensions) and exit; with --json,\n"
                    "one object per shape with its config.json")
      ->excludes(model)
      ->excludes(shape);
  command->add_option("--batch", options->batch, "Sources (prompts) decoded together")->check(CLI::Range(std::int64_t{1}, kMaxBatchSize))->capture_default_str();
  command->add_option("--src-len", options->src_len, "Tokens per source (prompt)")->check(positive)->capture_default_str();
  command->add_option("--new-tokens", options->new_tokens, "Decoder steps per sequence")->check(positive)->capture_default_str();
  command->add_option("--beam", options->beam, "Sequences per source (1: greedy)")->check(CLI::Range(1, 1024))->capture_default_str();
  command->add_option("-t,--threads", options->threads, "Threads for BLAS and the bandwidth probe")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command->add_option("--repeats", options->repeats, "Measured runs; medians are reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  command->add_option("--warmup", options->warmup, "Unmeasured runs first")->check(CLI::Range(0, 1000))->capture_default_str();
  command->add_flag("--json", options->json, "One JSON object instead of the table");
  command->callback([options, command] {
    if (options->list_shapes) return list_shapes(options->json);
    if (options->shape.empty() && !given(*command, "--model"))
      throw CLI::ValidationError("--model", "give a model directory, or --shape " + bench_shape_names("|") +
                                                " for a random one");
    run_bench(*options);
  });
}

}  // namespace ordo::tools
