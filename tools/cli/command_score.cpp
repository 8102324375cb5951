// ordo score: the teacher-forced log-probability of a target given a source, or for a
// decoder-only model of a text on its own.
//
//   ordo score --source "cats chase dogs" --target "Katzen jagen Hunde"
//   ordo score --source-ids "5 8 2" --target-ids "7 9 2"
//   ordo score --model weights/german-llama --target "Die Katze jagt den Hund ."
// Text targets get eos appended (the model must also predict the end), and for a
// decoder-only model bos before (unless --no-bos): each token after the first is
// scored given the ones before. Id targets are scored as given.
#include <iomanip>
#include <iostream>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace ordo::tools {

namespace {

struct ScoreOptions {
  CommonOptions common;
  std::string source;
  std::string target;
  std::string source_ids;
  std::string target_ids;
  bool no_bos = false;
  int max_input_tokens = 0;
  bool truncate = false;
  std::string source_lang, target_lang;  // a multilingual model's codes
};

// "--target: input text: is empty ..." rather than "target: ...": name the flag at fault.
[[noreturn]] void rethrow_naming_flag(const Error& e) {
  const std::string message = e.what();
  throw Error(message.starts_with("source: ") || message.starts_with("target: ") ? "--" + message : message);
}

// A decoder-only model scores the target alone.
Score score_alone(const Model& model, const ScoreOptions& options, bool text, bool has_source) {
  if (has_source)
    throw Error("score", "this model is decoder-only: it scores a text on its own, without --source",
                "give only --target (or --target-ids)");
  // Nothing here may be cut: the target is the whole input, and a cut one would be
  // scored as another text.
  if (options.truncate)
    throw CLI::ValidationError("--truncate", "a decoder-only model scores --target alone, and a target is never cut "
                                             "(it would be scored as another text); shorten it instead");
  GeneratorOptions generator_options;
  generator_options.add_bos = !options.no_bos;
  generator_options.max_input_tokens = options.max_input_tokens;
  const Generator generator(model, generator_options);
  if (text) {
    try {
      return generator.score(options.target);
    } catch (const Error& e) {
      throw Error("--target", e.what());
    }
  }
  const std::vector<std::vector<int>> sequences{parse_ids(options.target_ids, "--target-ids")};
  Score scored = generator.score_ids_batch(sequences).front();
  if (!scored.ok()) throw Error(scored.error);
  return scored;
}

Score score_pair(const Model& model, const ScoreOptions& options, bool text, bool has_source) {
  if (!has_source)
    throw Error("score", "this is an encoder-decoder model: it scores a target given a source",
                "give --source with --target (or --source-ids with --target-ids)");
  TranslatorOptions translator_options;
  translator_options.max_input_tokens = options.max_input_tokens;
  translator_options.truncate = options.truncate;
  translator_options.source_lang = options.source_lang;
  translator_options.target_lang = options.target_lang;
  const Translator translator(model, translator_options);
  if (text) {
    try {
      return translator.score(options.source, options.target);
    } catch (const OptionError&) {
      throw;  // a missing --source-lang or --target-lang: a usage error naming its flag
    } catch (const Error& e) {
      rethrow_naming_flag(e);
    }
  }
  const std::vector<std::vector<int>> sources{parse_ids(options.source_ids, "--source-ids")};
  const std::vector<std::vector<int>> targets{parse_ids(options.target_ids, "--target-ids")};
  Score scored = translator.score_ids_batch(sources, targets).front();
  if (!scored.ok()) throw Error(scored.error);
  return scored;
}

void run_score(const ScoreOptions& options, bool text, bool has_source) {
  const auto model = load_model(options.common);
  const bool alone = model.is_decoder_only();
  if (alone)  // a language model has no language codes: a given one is a usage error naming its flag
    for (const auto& [field, code] : {std::pair{"source_lang", &options.source_lang},
                                      std::pair{"target_lang", &options.target_lang}})
      if (!code->empty()) (void)model.language_id(*code, field);
  const Score scored = alone ? score_alone(model, options, text, has_source) : score_pair(model, options, text, has_source);
  const std::vector<int>& target = scored.ids;
  const std::vector<float>& logprobs = scored.token_logprobs;
  const double total = scored.logprob;

  if (scored.truncated)
    std::cerr << "ordo: warning: --source was cut to --max-input-tokens, its first tokens and eos (--truncate)\n";
  if (options.common.json) {
    nlohmann::json result = {{"token_logprobs", logprobs}, {"logprob", total}, {"target_ids", target}};
    if (scored.truncated) result["truncated"] = true;
    print_json_line(result);
    return;
  }
  std::vector<std::string> pieces;
  if (model.has_tokenizer() && text) {
    // Show each token next to its log-probability; eos has no piece of its own.
    const std::vector<int> without_eos(target.begin(), target.end() - 1);
    pieces = model.target_pieces(without_eos);
    pieces.push_back("</s>");
  }
  if (alone && !target.empty())  // the first token is context, not scored
    std::cout << "(scored after " << (options.no_bos ? "the first token" : "bos") << ")\n";
  std::cout << std::fixed << std::setprecision(4);
  for (std::size_t i = 0; i < target.size(); ++i) {
    std::cout << std::setw(8) << target[i] << "  " << std::setw(10) << logprobs[i];
    if (!pieces.empty()) std::cout << "  " << pieces[i];
    std::cout << '\n';
  }
  std::cout << "total log-probability: " << total << '\n';
}

}  // namespace

void setup_score(CLI::App& app) {
  auto options = std::make_shared<ScoreOptions>();
  CLI::App* command = app.add_subcommand(
      "score",
      "Score a target under the model (teacher forcing): the log-probability of each\n"
      "target token and their sum. Text targets get eos appended. An encoder-decoder\n"
      "model scores --target given --source; a decoder-only model scores --target alone\n"
      "(bos first unless --no-bos), each token given the ones before it. Text follows\n"
      "the rules of translate: UTF-8 without control characters but tab, within\n"
      "--max-input-tokens; --truncate cuts only a source, never a target.");
  CLI::Option* source = command->add_option("--source", options->source, "Source sentence");
  CLI::Option* target = command->add_option("--target", options->target, "Target sentence");
  CLI::Option* source_ids =
      command->add_option("--source-ids", options->source_ids, "Source token ids, e.g. \"5 8 2\"");
  CLI::Option* target_ids =
      command->add_option("--target-ids", options->target_ids, "Target token ids, ending with eos");
  source->needs(target);
  source_ids->needs(target_ids);
  command->add_flag("--no-bos", options->no_bos, "Decoder-only models: do not put bos before a text target");
  source->excludes(source_ids)->excludes(target_ids);
  target->excludes(source_ids)->excludes(target_ids);
  add_input_options(*command, options->max_input_tokens, options->truncate,
                    "--source and of --target, eos included",
                    "the first tokens of --source (a target is never cut: it would be scored as another text)");
  add_language_options(*command, options->source_lang, options->target_lang);
  add_common_options(*command, options->common);
  command->callback([options, command] {
    TranslatorOptions limits;  // --max-input-tokens is checked as the library checks it, before any work
    limits.max_input_tokens = options->max_input_tokens;
    validate_flags(limits);
    // Both halves of a pair, and not both pairs, are enforced by CLI11 (needs/excludes).
    const bool text = given(*command, "--target");
    if (!text && !given(*command, "--target-ids"))
      throw CLI::RequiredError("--target (with --source for an encoder-decoder model), or --target-ids");
    run_score(*options, text, given(*command, "--source") || given(*command, "--source-ids"));
  });
}

}  // namespace ordo::tools
