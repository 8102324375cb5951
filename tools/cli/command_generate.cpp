// ordo generate: continue a prompt. A decoder-only model continues the text itself; an
// encoder-decoder model continues a forced prefix of the translation of --source.
//
//   ordo generate --model weights/german-llama "Die Katze"     -> Die Katze jagt den Hund .
//   ordo generate --model weights/german-llama --sample --seed 3 "Der Hund"
//   ordo generate --source "cats chase dogs" "Katzen"           -> Katzen jagen Hunde
//   ordo generate --model DIR --prompt-ids "1 5 9"              -> ids in, ids out
//   ordo generate --model NLLB --source-lang eng_Latn --target-lang deu_Latn --source "cats" "Katzen"
//
// With greedy search or sampling (--beam 1) each token's text is printed and flushed as
// soon as it is chosen; with beams, the result is printed when the search ends.
#include <iostream>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/line_reader.h"
#include "tools/cli/run_report.h"

namespace ordo::tools {

namespace {

struct GenerateOptions {
  CommonOptions common;
  GeneratorOptions generator;
  std::vector<std::string> prompts;
  std::optional<std::string> prompt_ids;  // set, even to "", when --prompt-ids is given
  std::optional<std::string> source;      // encoder-decoder models
  std::optional<std::string> source_ids;
  bool no_bos = false;
  std::string input;   // --input FILE instead of stdin
  std::string output;
  bool verbose = false;  // --verbose: tools/run_report.h
};

nlohmann::json hypothesis_json(const Hypothesis& h, bool text, const DecodingOptions& decoding) {
  nlohmann::json j;
  j["generated_ids"] = h.ids;
  if (text) j["text"] = h.text;
  j["score"] = h.score;
  if (decoding.length_penalty != 0.0) j["normalized_score"] = h.normalized_score;
  j["finished"] = h.finished;
  return j;
}

nlohmann::json generation_json(const Generation& g, bool text, bool encoder_decoder, const DecodingOptions& decoding) {
  nlohmann::json j;
  if (encoder_decoder) {
    if (text) j["source"] = g.source;
    j["source_ids"] = g.source_ids;
  }
  if (text) j["prompt"] = g.prompt;
  j["prompt_ids"] = g.prompt_ids;
  if (g.truncated) j["truncated"] = true;
  if (!g.ok()) {
    j["error"] = g.error;
    return j;
  }
  add_hypotheses(j, g.hypotheses, decoding.n_best,
                 [&](const Hypothesis& h) { return hypothesis_json(h, text, decoding); });
  return j;
}

class GenerateCommand {
 public:
  GenerateCommand(const GenerateOptions& options, const Model& model)
      : options_(options),
        model_(model),
        generator_(model, with_bos(options)),
        in_(options.input),
        out_(options.output),
        encoder_decoder_(!model.is_decoder_only()) {}

  void run() {
    if (options_.prompt_ids) return run_ids();
    if (encoder_decoder_ && !options_.source)
      throw Error("generate", "this is an encoder-decoder model: it continues the translation of a source",
                  "give --source TEXT (the prompt is then the start of the translation)");
    if (!encoder_decoder_ && (options_.source || options_.source_ids))
      throw Error("generate", "this model is decoder-only: it reads no --source", "give the text as the prompt");
    // A multilingual model reads text only with both codes: a usage error before any
    // input is read (the Generator would find it at the first prompt).
    if (!model_.language_codes().empty())
      for (const auto& [field, code] : {std::pair{"source_lang", &options_.generator.source_lang},
                                        std::pair{"target_lang", &options_.generator.target_lang}})
        (void)model_.language_id(*code, field);
    if (!options_.prompts.empty()) return run_texts(options_.prompts, "prompt ");
    // --source alone is its translation; with --input, each line is a start of it.
    if (encoder_decoder_ && options_.input.empty()) return run_texts({""}, "");
    run_stream();
  }

 private:
  static GeneratorOptions with_bos(const GenerateOptions& options) {
    GeneratorOptions g = options.generator;
    g.add_bos = !options.no_bos;
    return g;
  }

  bool streaming() const { return !options_.common.json && options_.generator.decoding.beam_size == 1; }

  std::vector<std::string> sources_for(std::size_t count) const {
    return encoder_decoder_ ? std::vector<std::string>(count, options_.source.value_or("")) : std::vector<std::string>{};
  }

  // Prints one result (not streamed); returns false when it failed, reporting it on
  // stderr prefixed by `where`.
  bool print(const Generation& g, std::size_t index, const std::string& where, bool text) {
    const DecodingOptions& decoding = options_.generator.decoding;
    if (!g.ok()) std::cerr << "ordo: " << where << g.error << '\n';
    warn_if_truncated(g, where);
    if (options_.common.json) {
      print_json_line(generation_json(g, text, encoder_decoder_, decoding), out_.stream());
      return g.ok();
    }
    if (!g.ok()) {
      out_.stream() << '\n';
      return false;
    }
    // A blank stream line was neither read nor continued: its answer is an empty line. A
    // generated control character is escaped: one line per prompt, always.
    const bool blank = g.prompt_ids.empty() && g.source_ids.empty() && g.hypotheses.front().ids.empty();
    const auto shown = [&](const Hypothesis& h) {
      return blank ? std::string() : text ? escape_control_characters(g.prompt + h.text) : join_ids(h.ids);
    };
    if (decoding.n_best == 1)
      out_.stream() << shown(g.hypotheses.front()) << '\n';
    else
      print_n_best(out_.stream(), index, g.hypotheses, shown, decoding);
    return true;
  }

  void warn_if_truncated(const Generation& g, const std::string& where) const {
    if (!g.truncated) return;
    std::cerr << "ordo: " << where << "warning: cut to --max-input-tokens (--truncate): the model reads "
              << g.prompt_ids.size() << " prompt tokens";
    if (encoder_decoder_) std::cerr << " and " << g.source_ids.size() << " source tokens";
    std::cerr << '\n';
  }

  // One prompt, its text printed as it is generated, sampling from stream `index` (its
  // line number, as a batch would give it). A prompt that cannot be read (not UTF-8, too
  // long) prints an empty line: it is checked before anything is printed.
  bool stream(const std::string& prompt, std::size_t index, const std::string& where) {
    std::ostream& out = out_.stream();
    Generation request = generator_.prepare(prompt, options_.source.value_or(""));
    if (!request.ok()) {
      out << '\n';
      std::cerr << "ordo: " << where << request.error << '\n';
      return false;
    }
    warn_if_truncated(request, where);
    out << escape_control_characters(prompt) << std::flush;
    try {
      generator_.generate_prepared(
          std::move(request), [&](std::string_view text) { out << escape_control_characters(text) << std::flush; },
          index);
    } catch (const Error& e) {
      out << '\n';
      std::cerr << "ordo: " << where << e.what() << '\n';
      return false;
    }
    out << '\n';
    return true;
  }

  void run_texts(const std::vector<std::string>& prompts, const std::string& where_prefix) {
    std::size_t failures = 0;
    const auto where = [&](std::size_t i) {
      return prompts.size() > 1 ? where_prefix + std::to_string(i + 1) + ": " : std::string();
    };
    if (streaming()) {
      for (std::size_t i = 0; i < prompts.size(); ++i) failures += !stream(prompts[i], i, where(i));
    } else {
      const std::vector<std::string> sources = sources_for(prompts.size());
      const std::vector<Generation> results = generator_.generate_batch(prompts, sources);
      for (std::size_t i = 0; i < results.size(); ++i) failures += !print(results[i], i, where(i), true);
    }
    out_.check_written();
    if (failures > 0)
      throw Error("generate", prompts.size() == 1 ? "the prompt could not be continued (see above)"
                                                  : std::to_string(failures) + " of " + std::to_string(prompts.size()) +
                                                        " prompts failed (each is reported above)");
  }

  void run_ids() {
    std::vector<std::vector<int>> sources;
    if (encoder_decoder_) {
      if (!options_.source_ids)
        throw Error("generate", "this is an encoder-decoder model: --prompt-ids needs --source-ids");
      sources.push_back(parse_ids(*options_.source_ids, "--source-ids"));
    }
    const std::vector<std::vector<int>> prompts{parse_ids(*options_.prompt_ids, "--prompt-ids")};
    const Generation g = generator_.generate_ids_batch(prompts, sources).front();
    if (!g.ok()) throw Error(g.error);
    print(g, 0, "", model_.has_tokenizer() && options_.common.json);
    out_.check_written();
  }

  // One prompt per line of stdin or --input: streamed one at a time, or decoded a batch
  // at a time. A blank line is answered with an empty line, without generating: the
  // output stays one line per input line (to generate from nothing, give "" as PROMPT).
  void run_stream() {
    LineReader& in = in_;
    if (in.from_terminal()) std::cerr << "ordo: reading prompts from the terminal, one per line (Ctrl-D ends)\n";
    const std::size_t batch =
        streaming() || in.from_terminal() ? 1 : static_cast<std::size_t>(options_.generator.batch_size);
    std::size_t failures = 0;
    std::vector<std::string> pending;
    while (in.next_batch(batch, pending)) {
      const std::size_t first = in.lines_read() - pending.size();
      if (streaming()) {
        for (std::size_t i = 0; i < pending.size(); ++i) {
          if (!in.problem(i).empty()) {
            out_.stream() << '\n';
            std::cerr << "ordo: " << in.where(first + i + 1) << in.problem(i) << '\n';
            ++failures;
          } else if (is_blank(pending[i])) {
            out_.stream() << '\n';
          } else {
            failures += !stream(pending[i], first + i, in.where(first + i + 1));
          }
        }
      } else {
        std::vector<Generation> requests;
        for (std::size_t i = 0; i < pending.size(); ++i) {
          const std::string& line = pending[i];
          if (!in.problem(i).empty()) {
            requests.emplace_back().error = in.problem(i);
            continue;
          }
          if (!is_blank(line)) {
            requests.push_back(generator_.prepare(line, options_.source.value_or("")));
            continue;
          }
          Generation& blank = requests.emplace_back();
          blank.prompt = line;
          blank.hypotheses.emplace_back().finished = true;
        }
        const std::vector<Generation> results = generator_.generate_prepared_batch(std::move(requests), first);
        for (std::size_t i = 0; i < results.size(); ++i)
          failures += !print(results[i], first + i, in.where(first + i + 1), true);
      }
      out_.check_written();
    }
    in.check_read();
    if (failures > 0)
      throw Error("generate", std::to_string(failures) + " of " + std::to_string(in.lines_read()) +
                                  " prompts failed (each is reported above; its output line is " +
                                  (options_.common.json ? "an \"error\" object)" : "empty)"));
  }

  const GenerateOptions& options_;
  Model model_;
  Generator generator_;
  LineReader in_;  // opened before out_: a missing --input must not empty an existing --output
  Output out_;
  bool encoder_decoder_;
};

}  // namespace

void setup_generate(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* command = app.add_subcommand(
      "generate",
      "Continue a prompt. A decoder-only model continues PROMPT itself (bos_token_id put\n"
      "first unless --no-bos); an encoder-decoder model continues PROMPT as the start of\n"
      "the translation of --source (a multilingual model's, NLLB's, after the code of\n"
      "--target-lang, the source read as --source-lang). Greedy by default, beams with\n"
      "--beam, sampling with --sample. With --beam 1 each token's text is printed as soon\n"
      "as it is chosen.\n"
      "--max-length counts generated tokens; generation stops at eos. With no PROMPT,\n"
      "reads one prompt per line from stdin (or --input) and writes one line per input\n"
      "line: a blank line gives an empty line; a line that fails (not UTF-8, a NUL or\n"
      "another control character but tab, more than --max-input-tokens) gives an empty\n"
      "line (an \"error\" object with --json), is reported on stderr with its line number,\n"
      "the other lines go on, and the exit code at the end is 1.");
  command->add_option("prompt", options->prompts, "Text to continue (several: one after another)");
  command->add_option("--prompt-ids", options->prompt_ids,
                      "Continue token ids instead of text, e.g. \"1 5 9\" (used as given: no bos added)")
      ->excludes(command->get_option("prompt"));
  command->add_option("--source", options->source, "Encoder-decoder models: the sentence whose translation to continue")
      ->excludes(command->get_option("--prompt-ids"));
  command->add_option("--source-ids", options->source_ids, "Encoder-decoder models: the source as ids (with --prompt-ids)")
      ->needs(command->get_option("--prompt-ids"));
  command->add_flag("--no-bos", options->no_bos, "Do not put bos_token_id before a text prompt");
  command->add_option("--input", options->input, "Read prompts from FILE instead of stdin, one per line")
      ->type_name("FILE")
      ->excludes(command->get_option("prompt"))
      ->excludes(command->get_option("--prompt-ids"));
  command->add_option("--output", options->output, "Write to FILE instead of stdout")->type_name("FILE");
  add_decoding_options(*command, options->generator.decoding, options->generator.batch_size, "prompt");
  add_language_options(*command, options->generator.source_lang, options->generator.target_lang);
  add_input_options(*command, options->generator.max_input_tokens, options->generator.truncate,
                    "a prompt, bos included (and of a --source, eos included)",
                    "a prompt's last tokens (a source's first)");
  add_common_options(*command, options->common);
  add_verbose_flag(*command, options->verbose);
  command->get_option("--model")->description(
      "Model directory or shipped model's name (default: $ORDO_MODEL, else the shipped language model " +
      std::string(kDefaultLanguageModelName) + ", or with --source the shipped translation model)");
  command->callback([options, command] {
    check_output_is_not_input(options->input, options->output);
    validate_flags(options->generator);
    if (!given(*command, "--model") && !options->source && !options->source_ids)
      options->common.model_dir = default_language_model_directory().string();
    const RunReport report(options->verbose);  // printed when the run ends
    const Model model = report.load(options->common);
    options->generator.decoding = model.with_generation_defaults(options->generator.decoding, given_decoding_flags(*command));
    GenerateCommand(*options, model).run();
  });
}

}  // namespace ordo::tools
