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

#include "models/default_model.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace ordo::tools {

namespace {

namespace fs = std::filesystem;

// Bytes of the weight files: what the model costs on disk and, mapped, in memory.
std::uintmax_t weight_bytes(const Model& model) {
  std::uintmax_t bytes = 0;
  for (const SafetensorsFile& file : model.weights().files()) bytes += fs::file_size(file.path());
  return bytes;
}

nlohmann::json describe(const std::string& name, const fs::path& directory) {
  const auto model = Model::load(directory, nullptr);
  const ModelConfig& c = model->config();
  nlohmann::json defaults = nlohmann::json::array();
  if (name == kDefaultModelName) defaults.push_back("translate");
  if (name == kDefaultLanguageModelName) defaults.push_back("generate");
  return {{"name", name},
          {"directory", directory.string()},
          {"family", std::string(family_name(c.family))},
          {"kind", c.has_encoder() ? "encoder-decoder" : "decoder-only"},
          {"position_encoding", std::string(position_encoding_name(c.position_encoding))},
          {"parameters", model->weights().parameter_count()},
          {"bytes", weight_bytes(*model)},
          {"default_for", defaults}};
}

void print_table(const std::vector<nlohmann::json>& rows) {
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
              << "  " << std::right << std::setw(10) << r["parameters"].get<Index>() << "  " << std::setw(9)
              << r["bytes"].get<std::uintmax_t>() << (defaults.empty() ? "" : "  " + defaults) << '\n';
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
    print_table(rows);
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
