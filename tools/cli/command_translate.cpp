// ordo translate: text (or token ids) in, translations out; greedy, beam search or
// sampling, in batches.
//
//   ordo translate "cats chase dogs"                     -> Katzen jagen Hunde
//   ordo translate --beam 4 --n-best 3 "cats chase dogs" -> three scored hypotheses
//   ordo translate < file.txt > out.txt                  -> a line out per line in, a batch at a time
//   ordo translate --source-ids "5 8 2"                  -> ids in, ids out (no tokenizer needed)
#include <unistd.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/run_report.h"
#include "tools/cli/line_reader.h"
#include "tools/cli/progress.h"

namespace ordo::tools {

namespace {

struct TranslateOptions {
  CommonOptions common;
  TranslatorOptions translator;
  std::vector<std::string> texts;
  std::optional<std::string> source_ids;  // set, even to "", when --source-ids is given
  std::string input;                      // --input FILE instead of stdin
  std::string output;                     // --output FILE instead of stdout
  bool verbose = false;                   // --verbose: tools/run_report.h
  DecodingChoices given;               // over the model's generation defaults
};

nlohmann::json hypothesis_json(const Hypothesis& h, bool text, const DecodingOptions& decoding) {
  nlohmann::json j;
  if (text) j["translation"] = h.text;
  j["target_ids"] = h.ids;
  j["score"] = h.score;
  if (decoding.length_penalty != 0.0) j["normalized_score"] = h.normalized_score;
  j["finished"] = h.finished;
  return j;
}

// One object per input: with --n-best 1 the keys of a single translation (source,
// source_ids, translation, target_ids, score, ...); with more, "hypotheses": [...].
nlohmann::json translation_json(const Translation& t, bool text, const DecodingOptions& decoding) {
  nlohmann::json j;
  if (text) j["source"] = t.source;
  j["source_ids"] = t.source_ids;
  if (t.truncated) j["truncated"] = true;
  if (!t.ok()) {
    j["error"] = t.error;
    return j;
  }
  add_hypotheses(j, t.hypotheses, decoding.n_best,
                 [&](const Hypothesis& h) { return hypothesis_json(h, text, decoding); });
  return j;
}

// Prints one translation; returns false when it failed (then reported on stderr,
// prefixed by `where`, unless `where` is empty: the caller reports it).
// Text: the best translation (ids for id input) on one line; with --n-best N > 1, N
// lines "index ||| translation ||| score" (Marian's n-best form, index from 0).
bool print_translation(const Translation& t, std::size_t index, const std::string& where,
                       const TranslateOptions& options, bool text, std::ostream& out) {
  const DecodingOptions& decoding = options.translator.decoding;
  if (!t.ok() && !where.empty()) std::cerr << "ordo: " << where << t.error << '\n';
  if (t.truncated)
    std::cerr << "ordo: " << where << "warning: the source was cut to its first " << t.source_ids.size()
              << " tokens, eos included (--truncate)\n";
  if (options.common.json) {
    print_json_line(translation_json(t, text, decoding), out);
    return t.ok();
  }
  if (!t.ok()) {
    out << '\n';  // the output stays aligned with the input
    return false;
  }
  // A generated control character is escaped: one line per input line, always.
  const auto shown = [&](const Hypothesis& h) {
    return text ? escape_control_characters(h.text) : join_ids(h.ids);
  };
  if (decoding.n_best == 1)
    out << shown(t.hypotheses.front()) << '\n';
  else
    print_n_best(out, index, t.hypotheses, shown, decoding);
  return true;
}

// A progress bar for a file translated while a person watches stderr: --input FILE,
// and the translations not on that terminal too (--output FILE, or stdout redirected),
// where the bar would tear through them. Stdin from a terminal, pipes and logs: none.
bool shows_progress(const TranslateOptions& options) {
  const bool output_on_terminal = options.output.empty() && ::isatty(STDOUT_FILENO) == 1;
  return !options.input.empty() && stderr_is_terminal() && !output_on_terminal;
}

// Lines from stdin or --input, a batch at a time, each answered in input order before
// the next batch is read: memory stays bounded however long the input.
void translate_stream(const Translator& translator, const TranslateOptions& options, LineReader& in, Output& out) {
  if (in.from_terminal())  // a person typing: answer every line at once rather than per batch
    std::cerr << "ordo: reading sentences from the terminal, one per line (Ctrl-D ends)\n";
  const std::size_t batch = in.from_terminal() ? 1 : static_cast<std::size_t>(options.translator.batch_size);
  const bool progress = shows_progress(options);
  ProgressBar bar("translate", "lines", progress ? LineReader::count_lines(options.input) : 0, progress);
  std::size_t failures = 0;
  std::vector<std::string> pending;
  while (in.next_batch(batch, pending)) {
    const std::size_t first = in.lines_read() - pending.size();
    std::vector<Translation> results = translator.translate_batch(pending, first);
    for (std::size_t i = 0; i < results.size(); ++i)
      if (!in.problem(i).empty()) {  // a line too long to read: it was translated as an empty one
        results[i].hypotheses.clear();
        results[i].error = in.problem(i);
      }
    std::size_t tokens = 0;
    for (const Translation& t : results) {
      if (!t.ok() || t.truncated) bar.clear();  // its message gets a line of its own
      if (t.ok()) tokens += t.best().ids.size();
    }
    for (std::size_t i = 0; i < results.size(); ++i)
      failures += !print_translation(results[i], first + i, in.where(first + i + 1), options, true, out.stream());
    out.check_written();
    bar.advance(results.size(), tokens);
  }
  in.check_read();
  bar.finish();
  if (failures > 0)
    throw Error("translate", std::to_string(failures) + " of " + std::to_string(in.lines_read()) +
                                 " input lines failed (each is reported above; its output line is " +
                                 (options.common.json ? "an \"error\" object)" : "empty)"));
}

void run_translate(TranslateOptions options) {
  // Stream mode opens its input first: a missing one must not cost the model's loading,
  // nor an existing --output, which opening empties.
  std::optional<LineReader> in;
  if (!options.source_ids && options.texts.empty()) in.emplace(options.input);
  const RunReport report(options.verbose);  // printed when the run ends
  const auto model = report.load(options.common);
  options.translator.decoding = model.with_generation_defaults(options.translator.decoding, options.given);
  const Translator translator(model, options.translator);
  Output out(options.output);

  if (options.source_ids) {
    const std::vector<std::vector<int>> sources{parse_ids(*options.source_ids, "--source-ids")};
    const Translation t = translator.translate_ids_batch(sources).front();
    if (!t.ok()) throw Error(t.error);
    print_translation(t, 0, "", options, model.has_tokenizer() && options.common.json, out.stream());
    out.check_written();
    return;
  }
  if (in) return translate_stream(translator, options, *in, out);

  std::size_t failures = 0;
  const std::vector<Translation> results = translator.translate_batch(options.texts);
  for (std::size_t i = 0; i < results.size(); ++i)
    failures += !print_translation(results[i], i, results.size() > 1 ? "sentence " + std::to_string(i + 1) + ": " : "",
                                   options, true, out.stream());
  out.check_written();
  if (failures > 0 && results.size() > 1)
    throw Error("translate", std::to_string(failures) + " of " + std::to_string(results.size()) + " sentences failed");
  if (failures > 0) throw Error(results.front().error);
}

}  // namespace

void setup_translate(CLI::App& app) {
  auto options = std::make_shared<TranslateOptions>();
  CLI::App* command = app.add_subcommand(
      "translate",
      "Translate sentences: greedy by default, beam search with --beam, sampling with\n"
      "--sample. Each TEXT argument is one sentence; with none, reads one sentence per\n"
      "line from stdin (or --input) and writes one line per input line, in order, a batch\n"
      "at a time. A blank line gives an empty line; a line that fails (not UTF-8, a NUL or\n"
      "another control character but tab, more than --max-input-tokens) gives an empty\n"
      "line (an \"error\" object with --json), is reported on stderr with its line number,\n"
      "the other lines go on, and the exit code at the end is 1. A file (--input FILE, with\n"
      "--output FILE or stdout redirected) shows a progress bar on stderr when stderr is a\n"
      "terminal: lines done, lines/s, tokens/s, ETA.");
  command->add_option("text", options->texts, "Sentences to translate");
  command->add_option("--source-ids", options->source_ids,
                      "Translate token ids instead of text, e.g. \"5 8 2\" (include eos); "
                      "prints the target ids")
      ->excludes(command->get_option("text"));
  command->add_option("--input", options->input, "Read sentences from FILE instead of stdin")
      ->type_name("FILE")
      ->excludes(command->get_option("text"))
      ->excludes(command->get_option("--source-ids"));
  command->add_option("--output", options->output, "Write to FILE instead of stdout")->type_name("FILE");
  add_decoding_options(*command, options->translator.decoding, options->translator.batch_size);
  add_language_options(*command, options->translator.source_lang, options->translator.target_lang);
  add_input_options(*command, options->translator.max_input_tokens, options->translator.truncate,
                    "a source, eos included", "its first tokens");
  add_common_options(*command, options->common);
  add_verbose_flag(*command, options->verbose);
  command->callback([options, command] {
    check_output_is_not_input(options->input, options->output);
    validate_flags(options->translator);
    options->given = given_decoding_flags(*command);
    run_translate(*options);
  });
}

}  // namespace ordo::tools
