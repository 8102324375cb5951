// ordo eval: translate a test set and score it against its references.
//
//   ordo eval --data weights/data/test.tsv
//
// FILE.tsv has one pair per line: source<TAB>reference. Reports exact-match accuracy,
// token accuracy and corpus BLEU (see tools/metrics.h). A sentence the model cannot
// translate (e.g. longer than a learned-position table) counts as wrong, and the
// first such error is reported.
#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <span>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/metrics.h"
#include "tools/cli/progress.h"

namespace ordo::tools {

namespace {

struct EvalOptions {
  CommonOptions common;
  std::string data;
  TranslatorOptions translator;
  int show_errors = 0;
  DecodingChoices given;  // over the model's generation defaults
};

struct TestSet {
  std::vector<std::string> sources;
  std::vector<std::string> references;
  std::vector<std::size_t> lines;  // each pair's line number in the file
};

TestSet read_tsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path, "cannot open the test set", "give a TSV file: source<TAB>reference per line");
  TestSet set;
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto tab = line.find('\t');
    if (tab == std::string::npos || line.find('\t', tab + 1) != std::string::npos)
      throw Error(path + ":" + std::to_string(number), "expected two tab-separated columns (source, reference)");
    set.sources.push_back(line.substr(0, tab));
    set.references.push_back(line.substr(tab + 1));
    set.lines.push_back(number);
  }
  if (set.sources.empty()) throw Error(path, "holds no sentence pairs");
  return set;
}

void run_eval(EvalOptions options) {
  const TestSet set = read_tsv(options.data);
  const auto model = load_model(options.common);
  options.translator.decoding = model.with_generation_defaults(options.translator.decoding, options.given);
  const Translator translator(model, options.translator);

  std::vector<std::string> hypotheses(set.sources.size());
  std::size_t failures = 0;
  std::size_t first_failure_index = set.sources.size();
  std::string first_failure;
  // A few batches at a time, so that a progress bar can move (on a terminal's stderr).
  // Without sampling the chunks follow the sentences sorted by length, so that each is
  // as evenly long as one call over the whole set would have made its batches (input
  // order cost 12% more). Sampling keeps input order: sentence i draws from stream i
  // whatever its chunk. Either way the results do not depend on the terminal.
  const std::size_t count = set.sources.size();
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (!options.translator.decoding.sample)
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return set.sources[a].size() < set.sources[b].size(); });
  const std::size_t chunk = static_cast<std::size_t>(options.translator.batch_size) * 4;
  ProgressBar bar("eval", "sentences", count, stderr_is_terminal());
  std::vector<std::string> lines;
  for (std::size_t first = 0; first < count; first += chunk) {
    lines.clear();
    for (std::size_t k = first; k < std::min(first + chunk, count); ++k) lines.push_back(set.sources[order[k]]);
    const std::vector<Translation> translations = translator.translate_batch(lines, first);
    std::size_t tokens = 0;
    for (std::size_t k = 0; k < translations.size(); ++k) {
      const Translation& t = translations[k];
      const std::size_t i = order[first + k];
      hypotheses[i] = t.ok() ? t.best().text : "";
      if (t.ok()) tokens += t.best().ids.size();
      if (!t.ok()) {
        ++failures;
        if (i < first_failure_index) {  // the first in the file, as before
          first_failure_index = i;
          first_failure = "line " + std::to_string(set.lines[i]) + ": " + t.error;
        }
      }
    }
    bar.advance(translations.size(), tokens);
  }
  bar.finish();

  const AccuracyStats acc = accuracy(hypotheses, set.references);
  const BleuStats bleu = corpus_bleu(hypotheses, set.references);
  nlohmann::json wrong = nlohmann::json::array();
  for (std::size_t i = 0; i < hypotheses.size() && static_cast<int>(wrong.size()) < options.show_errors; ++i)
    if (hypotheses[i] != set.references[i])
      wrong.push_back({{"source", set.sources[i]}, {"reference", set.references[i]}, {"translation", hypotheses[i]}});

  if (options.common.json) {
    nlohmann::json result = {{"data", options.data},
                             {"model", options.common.model_dir},
                             {"compute_type", model.info().compute_type},
                             {"sentences", hypotheses.size()},
                             {"exact_match", acc.exact_match},
                             {"token_accuracy", acc.token_accuracy},
                             {"bleu", bleu.bleu},
                             {"bleu_precisions", bleu.precisions},
                             {"brevity_penalty", bleu.brevity_penalty},
                             {"failures", failures}};
    if (failures > 0) result["first_failure"] = first_failure;
    if (options.show_errors > 0) result["errors"] = wrong;
    print_json_line(result);
    return;
  }
  std::cout << std::fixed << std::setprecision(2) << "model:          " << options.common.model_dir
            << "\nweights:        " << model.info().compute_type << "\ndata:           " << options.data << "\nsentences:      " << hypotheses.size()
            << "\nexact match:    " << acc.exact_match << " %\ntoken accuracy: " << acc.token_accuracy
            << " %\nBLEU:           " << bleu.bleu << "\n";
  if (failures > 0)
    std::cout << "failed:         " << failures << " (counted as wrong; first: " << first_failure << ")\n";
  for (const auto& w : wrong)
    std::cout << "\n  source:      " << w["source"].get<std::string>() << "\n  reference:   "
              << w["reference"].get<std::string>() << "\n  translation: "
              << escape_control_characters(w["translation"].get<std::string>())
              << '\n';
}

}  // namespace

void setup_eval(CLI::App& app) {
  auto options = std::make_shared<EvalOptions>();
  CLI::App* command = app.add_subcommand(
      "eval",
      "Translate the source column of a TSV test set (source<TAB>reference per line) and\n"
      "report exact-match accuracy, token accuracy (position-wise, over whitespace tokens)\n"
      "and corpus BLEU-4 (as sacreBLEU on already tokenized text). Shows a progress bar on\n"
      "stderr while it translates, when stderr is a terminal.");
  command->add_option("--data", options->data, "Test set, a TSV file")
      ->required()
      ->check(CLI::ExistingFile)
      ->option_text("FILE REQUIRED");
  add_decoding_options(*command, options->translator.decoding, options->translator.batch_size);
  add_language_options(*command, options->translator.source_lang, options->translator.target_lang);
  command->remove_option(command->get_option("--n-best"));  // eval scores the best translation alone
  add_input_options(*command, options->translator.max_input_tokens, options->translator.truncate,
                    "a source, eos included", "its first tokens");
  command->add_option("--show-errors", options->show_errors, "Also list up to N wrong translations")
      ->check(CLI::Range(0, 1'000'000));
  add_common_options(*command, options->common);
  command->callback([options, command] {
    validate_flags(options->translator);
    options->given = given_decoding_flags(*command);
    run_eval(*options);
  });
}

}  // namespace ordo::tools
