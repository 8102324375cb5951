// ordo inspect: what a model directory holds: its config (defaults filled in), the
// parameter count, and every tensor with dtype and shape; tensors the config does not
// use are marked, never hidden.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <set>

#include "tools/commands.h"
#include "tools/common.h"

namespace ordo::tools {

namespace {

struct InspectOptions {
  CommonOptions common;
};

nlohmann::json describe(const Model& model) {
  const std::set<std::string> unused(model.weights().unused().begin(),
                                     model.weights().unused().end());
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorInfo& info : model.weights().file().tensors())
    tensors.push_back({{"name", info.name},
                       {"dtype", dtype_name(info.dtype)},
                       {"shape", info.shape},
                       {"used", !unused.contains(info.name)}});
  nlohmann::json tokenizer = nullptr;
  if (model.has_tokenizer()) tokenizer = {{"vocab_size", model.tokenizer_vocab_size()}};
  return {{"directory", model.directory().string()},
          {"config", model.config().to_json()},
          {"parameters", model.weights().parameter_count()},
          {"tensors", tensors},
          {"unused_tensors", model.weights().unused()},
          {"tokenizer", tokenizer}};
}

void print_table(const nlohmann::json& d) {
  std::cout << "model directory: " << d["directory"].get<std::string>() << "\n\nconfig:\n";
  for (const auto& [key, value] : d["config"].items())
    std::cout << "  " << std::left << std::setw(34) << key << value.dump() << '\n';
  std::cout << "\nparameters: " << d["parameters"].get<Index>() << '\n';
  if (!d["tokenizer"].is_null())
    std::cout << "tokenizer: " << d["tokenizer"]["vocab_size"].get<Index>() << " pieces\n";
  else
    std::cout << "tokenizer: none (use --source-ids / --target-ids)\n";

  std::size_t width = 4;
  for (const auto& t : d["tensors"]) width = std::max(width, t["name"].get<std::string>().size());
  std::cout << "\ntensors (" << d["tensors"].size() << "):\n";
  for (const auto& t : d["tensors"]) {
    std::string shape;
    for (const auto& dim : t["shape"]) shape += (shape.empty() ? "" : ", ") + dim.dump();
    std::cout << "  " << std::left << std::setw(static_cast<int>(width)) << t["name"].get<std::string>()
              << "  " << std::setw(5) << t["dtype"].get<std::string>() << "  [" << shape << "]"
              << (t["used"].get<bool>() ? "" : "  UNUSED by this config") << '\n';
  }
}

void run_inspect(const InspectOptions& options) {
  // Unused tensors are part of the report below, so the load-time warning is not repeated.
  const auto model = load_model(options.common, nullptr);
  const nlohmann::json description = describe(*model);
  if (options.common.json)
    print_json_line(description);
  else
    print_table(description);
}

}  // namespace

void setup_inspect(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* command = app.add_subcommand(
      "inspect", "Show a model's config, parameter count and tensors (name, dtype, shape).");
  add_common_options(*command, options->common);
  command->callback([options] { run_inspect(*options); });
}

}  // namespace ordo::tools
