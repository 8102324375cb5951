// ordo models: the models shipped with ordo, by the names --model accepts.
//
//   ordo models          -> name, family, kind, positions, parameters, bytes; a row each
//   ordo models --json   -> one object per model
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace ordo::tools {

namespace {

namespace fs = std::filesystem;

nlohmann::json describe(const std::string& name, const fs::path& directory) {
  const ModelInfo info = Model::load(directory, quiet).info();
  nlohmann::json defaults = nlohmann::json::array();
  if (name == kDefaultModelName) defaults.push_back("translate");
  if (name == kDefaultLanguageModelName) defaults.push_back("generate");
  return {{"name", name},
          {"directory", directory.string()},
          {"family", info.family},
          {"kind", info.decoder_only ? "decoder-only" : "encoder-decoder"},
          {"position_encoding", info.position_encoding},
          {"parameters", info.parameters},
          {"bytes", info.weight_bytes},
          {"default_for", defaults}};
}

void print_model_table(const std::vector<nlohmann::json>& rows) {
  std::size_t name_w = 4;
  for (const auto& r : rows) name_w = std::max(name_w, r["name"].get<std::string>().size());
  std::cout << std::left << std::setw(static_cast<int>(name_w)) << "name" << "  " << std::setw(6) << "family"
            << "  " << std::setw(15) << "kind" << "  " << std::setw(11) << "positions" << "  " << std::right
            << std::setw(10) << "parameters" << "  " << std::setw(9) << "bytes" << "  default for\n";
  for (const auto& r : rows) {
    std::string defaults;
    for (const auto& d : r["default_for"]) defaults += (defaults.empty() ? "" : ", ") + d.get<std::string>();
    std::cout << std::left << std::setw(static_cast<int>(name_w)) << r["name"].get<std::string>() << "  "
              << std::setw(6) << r["family"].get<std::string>() << "  " << std::setw(15)
              << r["kind"].get<std::string>() << "  " << std::setw(11) << r["position_encoding"].get<std::string>()
              << "  " << std::right << std::setw(10) << r["parameters"].get<std::int64_t>() << "  " << std::setw(9)
              << r["bytes"].get<std::uint64_t>() << (defaults.empty() ? "" : "  " + defaults) << '\n';
  }
}

void run_models(bool json) {
  const fs::path directory = shipped_models_directory();
  std::vector<nlohmann::json> rows;
  for (const std::string& name : shipped_model_names()) {
    rows.push_back(describe(name, directory / name));
    if (json) print_json_line(rows.back());
  }
  if (!json) {
    std::cout << "shipped models in " << directory.string() << " (give a name to --model):\n\n";
    print_model_table(rows);
  }
}

}  // namespace

void setup_models(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* command = app.add_subcommand(
      "models",
      "List the models shipped with ordo (in <prefix>/share/ordo, or the source tree's weights/):\n"
      "name, family, kind, positional scheme, parameters and bytes of weights. Any command's\n"
      "--model takes these names (ordo generate --model german-llama \"Die Katze\").");
  command->add_flag("--json", *json, "Machine-readable output: one JSON object per model");
  command->callback([json] { run_models(*json); });
}

}  // namespace ordo::tools
