// ordo score: the teacher-forced log-probability of a target given a source.
//
//   ordo score --source "cats chase dogs" --target "Katzen jagen Hunde"
//   ordo score --source-ids "5 8 2" --target-ids "7 9 2"
// Text targets get eos appended (the model must also predict the end); id targets are
// scored as given and should end with eos.
#include <iomanip>
#include <iostream>

#include "engine/error.h"
#include "tools/commands.h"
#include "tools/common.h"

namespace ordo::tools {

namespace {

struct ScoreOptions {
  CommonOptions common;
  std::string source;
  std::string target;
  std::string source_ids;
  std::string target_ids;
};

void run_score(const ScoreOptions& options, bool text) {
  const auto model = load_model(options.common);
  const Translator translator(model);
  Scored scored;
  if (text) {
    try {
      scored = translator.score(options.source, options.target);
    } catch (const Error& e) {  // name the flag at fault: "--target: input text: is empty ..."
      const std::string message = e.what();
      throw Error(message.starts_with("source: ") || message.starts_with("target: ") ? "--" + message : message);
    }
  } else {
    const std::vector<std::vector<int>> sources{parse_ids(options.source_ids, "--source-ids")};
    const std::vector<std::vector<int>> targets{parse_ids(options.target_ids, "--target-ids")};
    scored = translator.score_ids_batch(sources, targets).front();
    if (!scored.ok()) throw Error(scored.error);
  }
  const std::vector<int>& target = scored.target_ids;
  const std::vector<float>& logprobs = scored.token_logprobs;
  const double total = scored.score;

  if (options.common.json) {
    print_json_line({{"token_logprobs", logprobs}, {"logprob", total}, {"target_ids", target}});
    return;
  }
  std::vector<std::string> pieces;
  if (model->has_tokenizer() && text) {
    // Show each token next to its log-probability; eos has no piece of its own.
    const std::vector<int> without_eos(target.begin(), target.end() - 1);
    pieces = model->target_pieces(without_eos);
    pieces.push_back("</s>");
  }
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
      "target token and their sum. Text targets get eos appended.");
  CLI::Option* source = command->add_option("--source", options->source, "Source sentence");
  CLI::Option* target = command->add_option("--target", options->target, "Target sentence");
  CLI::Option* source_ids =
      command->add_option("--source-ids", options->source_ids, "Source token ids, e.g. \"5 8 2\"");
  CLI::Option* target_ids =
      command->add_option("--target-ids", options->target_ids, "Target token ids, ending with eos");
  source->needs(target);
  target->needs(source);
  source_ids->needs(target_ids);
  target_ids->needs(source_ids);
  source->excludes(source_ids)->excludes(target_ids);
  target->excludes(source_ids)->excludes(target_ids);
  add_common_options(*command, options->common);
  command->callback([options, command] {
    // Both halves of a pair, and not both pairs, are enforced by CLI11 (needs/excludes).
    const bool text = given(*command, "--source");
    if (!text && !given(*command, "--source-ids"))
      throw CLI::RequiredError("--source and --target, or --source-ids and --target-ids");
    run_score(*options, text);
  });
}

}  // namespace ordo::tools
