// Each ordo command lives in its own file (tools/cli/command_<name>.cpp) and registers
// itself on the app here; main() only calls these.
#pragma once

#include <CLI/CLI.hpp>

namespace ordo::tools {

void setup_translate(CLI::App& app);
void setup_score(CLI::App& app);
void setup_inspect(CLI::App& app);
void setup_compare(CLI::App& app);
void setup_eval(CLI::App& app);
void setup_generate(CLI::App& app);
void setup_bench(CLI::App& app);
void setup_viz(CLI::App& app);  // viz pe, viz attention
void setup_models(CLI::App& app);
void setup_tokenize(CLI::App& app);
void setup_detokenize(CLI::App& app);
void setup_serve(CLI::App& app);
void setup_quantize(CLI::App& app);

}  // namespace ordo::tools
