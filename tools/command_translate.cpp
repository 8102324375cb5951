// ordo translate: greedy translation of text (or token ids).
//
//   ordo translate "cats chase dogs"            -> Katzen jagen Hunde
//   echo "dogs chase cats" | ordo translate     -> one line out per line in, streamed
//   ordo translate --source-ids "5 8 2"         -> ids in, ids out (no tokenizer needed)
#include <unistd.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/search.h"
#include "tools/commands.h"
#include "tools/common.h"

namespace ordo::tools {

namespace {

struct TranslateOptions {
  CommonOptions common;
  std::vector<std::string> texts;
  std::optional<std::string> source_ids;  // set, even to "", when --source-ids is given
  Index max_length = 0;
};

nlohmann::json translate_text(const Model& model, const std::string& text,
                              const SearchOptions& search) {
  const std::vector<int> source = model.tokenize_source(text);
  const Hypothesis best = greedy_search(model.transformer(), source, search);
  return {{"source", text},
          {"translation", model.detokenize_target(best.ids)},
          {"target_ids", best.ids},
          {"score", best.score}};
}

void print_result(const nlohmann::json& result, bool json) {
  if (json) {
    print_json_line(result);
  } else {
    std::cout << result["translation"].get<std::string>() << std::endl;  // flushed per line
  }
}

void run_translate(const TranslateOptions& options) {
  const SearchOptions search{options.max_length};
  const auto model = load_model(options.common);

  if (options.source_ids) {
    const std::vector<int> source = parse_ids(*options.source_ids, "--source-ids");
    const Hypothesis best = greedy_search(model->transformer(), source, search);
    if (options.common.json) {
      nlohmann::json result = {{"source_ids", source}, {"target_ids", best.ids}, {"score", best.score}};
      if (model->has_tokenizer()) {  // the text too, when the model can spell it
        result["source"] = model->detokenize_source(source);
        result["translation"] = model->detokenize_target(best.ids);
      }
      print_json_line(result);
    } else {
      std::cout << join_ids(best.ids) << std::endl;
    }
    return;
  }

  if (!options.texts.empty()) {
    for (const std::string& text : options.texts)
      print_result(translate_text(*model, text, search), options.common.json);
    return;
  }

  // Streaming from stdin: one output line per input line, so that outputs stay aligned
  // with inputs. A line that fails is reported on stderr, answered with an empty line,
  // and the command exits non-zero at the end.
  if (::isatty(STDIN_FILENO))  // a person at a terminal, not a pipe: say what we wait for
    std::cerr << "ordo: reading sentences from the terminal, one per line (Ctrl-D ends)\n";
  std::string line;
  Index line_number = 0;
  Index failures = 0;
  while (std::getline(std::cin, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // files saved on Windows
    try {
      print_result(translate_text(*model, line, search), options.common.json);
    } catch (const Error& e) {
      ++failures;
      std::cerr << "ordo: stdin line " << line_number << ": " << e.what() << '\n';
      if (options.common.json)
        print_json_line({{"source", line}, {"error", e.what()}});
      else
        std::cout << std::endl;
    }
  }
  if (failures > 0)
    throw Error("translate", std::to_string(failures) + " of " + std::to_string(line_number) +
                                 " input lines failed (each is reported above; its output line is " +
                                 (options.common.json ? "an \"error\" object)" : "empty)"));
}

}  // namespace

void setup_translate(CLI::App& app) {
  auto options = std::make_shared<TranslateOptions>();
  CLI::App* command = app.add_subcommand(
      "translate",
      "Translate text greedily. Each TEXT argument is one sentence; with none, reads one\n"
      "sentence per line from stdin and prints each translation as soon as it is ready.");
  command->add_option("text", options->texts, "Sentences to translate");
  command->add_option("--source-ids", options->source_ids,
                      "Translate token ids instead of text, e.g. \"5 8 2\" (include eos); "
                      "prints the target ids")
      ->excludes(command->get_option("text"));
  add_max_length_option(*command, options->max_length);
  add_common_options(*command, options->common);
  command->callback([options] { run_translate(*options); });
}

}  // namespace ordo::tools
