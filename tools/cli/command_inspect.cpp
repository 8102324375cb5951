// ordo inspect: what a model directory holds: its family and architecture, its config
// (defaults filled in), the parameter count, and every tensor with dtype, shape and
// file; tensors the config does not use are marked, never hidden.
#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace ordo::tools {

namespace {

struct InspectOptions {
  CommonOptions common;
};

nlohmann::json describe(const Model& model) {
  const ModelInfo info = model.info();
  nlohmann::json tensors = nlohmann::json::array();
  std::vector<std::string> unused;
  for (const ModelInfo::Tensor& t : info.tensors) {
    nlohmann::json tensor = {{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}, {"used", t.used}};
    if (info.weight_files.size() > 1) tensor["file"] = t.file;
    tensors.push_back(std::move(tensor));
    if (!t.used) unused.push_back(t.name);
  }
  nlohmann::json tokenizer = nullptr;
  if (model.has_tokenizer()) tokenizer = {{"vocab_size", info.tokenizer_vocab_size}};
  if (!info.language_codes.empty()) tokenizer["language_codes"] = info.language_codes;
  const nlohmann::json architecture = {
      {"family", info.family},
      {"kind", info.decoder_only ? "decoder-only" : "encoder-decoder"},
      {"attention_heads", info.attention_heads},
      {"key_value_heads", info.key_value_heads},
      {"grouped_query_ratio", info.attention_heads / info.key_value_heads},
      {"weight_files", info.weight_files.size()}};
  return {{"directory", model.directory().string()},
          {"architecture", architecture},
          {"config", nlohmann::json::parse(info.config_json)},
          {"generation_config", nlohmann::json::parse(info.generation_config_json)},
          {"generation_config_file", info.generation_config_file},
          {"parameters", info.parameters},
          {"compute_type", info.compute_type},
          {"matrix_bytes", info.matrix_bytes},
          {"tensors", tensors},
          {"unused_tensors", unused},
          {"tokenizer", tokenizer}};
}

void print_description(const nlohmann::json& d) {
  const auto& a = d["architecture"];
  std::cout << "model directory: " << d["directory"].get<std::string>() << "\n"
            << "family: " << a["family"].get<std::string>() << " (" << a["kind"].get<std::string>() << ")\n"
            << "grouped-query attention: " << a["attention_heads"].get<std::int64_t>() << " query heads over "
            << a["key_value_heads"].get<std::int64_t>() << " K/V heads (ratio " << a["grouped_query_ratio"].get<std::int64_t>()
            << ":1)\n"
            << "weights: " << a["weight_files"].get<std::size_t>() << " file(s)\n\nconfig:\n";
  for (const auto& [key, value] : d["config"].items())
    std::cout << "  " << std::left << std::setw(34) << key << value.dump() << '\n';
  if (!d["generation_config"].empty()) {
    // The decoding defaults the flags override (models/generation_config.h).
    std::cout << "\ngeneration defaults (" << printable(d["generation_config_file"].get<std::string>()) << "):\n";
    for (const auto& [key, value] : d["generation_config"].items())
      std::cout << "  " << std::left << std::setw(34) << key << value.dump() << '\n';
  }
  std::cout << "\nparameters: " << d["parameters"].get<std::int64_t>() << '\n'
            << "weight matrices run as: " << d["compute_type"].get<std::string>() << " ("
            << d["matrix_bytes"].get<std::uint64_t>() << " bytes)\n";
  if (d["tokenizer"].is_null()) {
    const bool decoder_only = a["kind"].get<std::string>() == "decoder-only";
    std::cout << "tokenizer: none (use " << (decoder_only ? "--prompt-ids" : "--source-ids") << " / --target-ids)\n";
  } else {
    std::cout << "tokenizer: " << d["tokenizer"]["vocab_size"].get<std::int64_t>() << " pieces\n";
    if (d["tokenizer"].contains("language_codes")) {
      // --source-lang and --target-lang take these; codes come from the files: escaped.
      std::cout << "language codes (" << d["tokenizer"]["language_codes"].size() << "):";
      for (const auto& code : d["tokenizer"]["language_codes"]) std::cout << ' ' << printable(code.get<std::string>());
      std::cout << '\n';
    }
  }

  std::size_t width = 4;
  // Names come from the file: escaped, so that none can forge a line or drive the terminal.
  for (const auto& t : d["tensors"]) width = std::max(width, printable(t["name"].get<std::string>()).size());
  std::cout << "\ntensors (" << d["tensors"].size() << "):\n";
  for (const auto& t : d["tensors"]) {
    std::string shape;
    for (const auto& dim : t["shape"]) shape += (shape.empty() ? "" : ", ") + dim.dump();
    std::cout << "  " << std::left << std::setw(static_cast<int>(width)) << printable(t["name"].get<std::string>())
              << "  " << std::setw(5) << t["dtype"].get<std::string>() << "  [" << shape << "]"
              << (t.contains("file") ? "  " + printable(t["file"].get<std::string>()) : "")
              << (t["used"].get<bool>() ? "" : "  UNUSED by this config") << '\n';
  }
}

void run_inspect(const InspectOptions& options) {
  // Unused tensors are part of the report below, so the load-time warning is not repeated.
  const auto model = load_model(options.common, quiet);
  const nlohmann::json description = describe(model);
  if (options.common.json)
    print_json_line(description);
  else
    print_description(description);
}

}  // namespace

void setup_inspect(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* command = app.add_subcommand(
      "inspect", "Show a model's config, parameter count and tensors (name, dtype, shape).");
  add_common_options(*command, options->common);
  command->remove_option(command->get_option("--threads"));  // inspect computes nothing
  command->callback([options] { run_inspect(*options); });
}

}  // namespace ordo::tools
