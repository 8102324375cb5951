// ordo detokenize: ids back to text, as translate and generate print them.
//
//   ordo detokenize "122 84 12 111 1"                      -> Katzen jagen Hunde
//   ordo detokenize --model german-llama "1 11 9 50"       -> (bos skipped) the prompt's text
//   ordo detokenize --as source "133 85 123 1"             -> cats chase dogs
//
// Every id is checked against the vocabulary first: one outside it is an error naming
// the id and its position, never a crash or an empty string.
#include <iostream>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace ordo::tools {

namespace {

struct DetokenizeOptions {
  CommonOptions common;
  std::vector<std::string> ids;  // each "5 8 2" or "5,8,2"; several join
  std::string as = "target";
};

void run_detokenize(const DetokenizeOptions& options) {
  std::vector<int> ids;
  for (const std::string& group : options.ids) {
    const std::vector<int> some = parse_ids(group, "ids");
    ids.insert(ids.end(), some.begin(), some.end());
  }
  const auto model = load_model_to_tokenize(options.common, quiet);
  if (options.as == "source" && model.is_decoder_only())
    throw CLI::ValidationError("--as", "source: this model is decoder-only and has no source ids; use target");
  // The pieces check every id against the tokenizer's vocabulary, even those after an
  // eos that the text leaves out: a bad id is an error naming it and its position.
  const bool source = options.as == "source";
  const std::vector<std::string> pieces = source ? model.source_pieces(ids) : model.target_pieces(ids);
  const std::string text = source ? model.detokenize_source(ids) : model.detokenize_target(ids);
  if (options.common.json)
    print_json_line({{"ids", ids}, {"as", options.as}, {"text", text}, {"pieces", pieces}});
  else
    std::cout << text << '\n';
}

}  // namespace

void setup_detokenize(CLI::App& app) {
  auto options = std::make_shared<DetokenizeOptions>();
  CLI::App* command = app.add_subcommand(
      "detokenize",
      "Turn token ids back into text, as translate and generate print it: a target stops at\n"
      "its first eos and skips pad, bos and decoder_start; a source skips eos and pad. Every\n"
      "id is checked against the model's vocabulary first.");
  command->add_option("ids", options->ids, "Token ids, e.g. \"122 84 12 111 1\" or 122 84 12 111 1")->required();
  command
      ->add_option("--as", options->as,
                   "Which ids: target (what the decoder produced, the default) or source (encoder input)")
      ->check(CLI::IsMember({"source", "target"}))
      ->capture_default_str();
  add_common_options(*command, options->common);
  command->callback([options] { run_detokenize(*options); });
}

}  // namespace ordo::tools
