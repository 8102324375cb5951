// ordo tokenize: the ids and pieces a model reads for a text, as it reads them.
//
//   ordo tokenize "cats chase dogs"               -> a source: pieces and ids, eos appended
//   ordo tokenize --model german-llama "Die Katze" -> a prompt: bos first
//   ordo tokenize --as target --json "Katzen jagen Hunde"
//
// The ids are exactly what translate, generate and score feed the model (the same
// Model::tokenize_* calls), so `--source-ids`/`--prompt-ids` take them as they are.
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace ordo::tools {

namespace {

struct TokenizeOptions {
  CommonOptions common;
  std::vector<std::string> texts;
  std::string as;  // source, target, prompt; empty: what the model reads first
  bool no_bos = false;
  std::string source_lang, target_lang;  // a multilingual model's codes
};

// Display width of UTF-8 text: its code points (the pieces are letters, not wide CJK).
std::size_t width_of(const std::string& text) {
  std::size_t width = 0;
  for (const char c : text)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++width;
  return width;
}

// What each role means, for the header line and --help.
std::string role_description(const std::string& role, const Model& model, bool bos) {
  if (role == "source") return "a source, as the encoder reads it (eos appended)";
  if (role == "target") return "a target, as score reads it (eos appended)";
  if (model.is_decoder_only())
    return bos && model.bos_token_id() ? "a prompt, as the decoder reads it (bos first)"
                                              : "a prompt, as the decoder reads it (no bos)";
  return model.language_codes().empty() ? "a prompt: the forced start of a translation (no eos)"
                                        : "a prompt: the forced start of a translation, after its language code (no eos)";
}

void run_tokenize(const TokenizeOptions& options) {
  const auto model = load_model_to_tokenize(options.common, quiet);
  const bool decoder_only = model.is_decoder_only();
  const std::string role = !options.as.empty() ? options.as : decoder_only ? "prompt" : "source";
  if (role == "source" && decoder_only)
    throw CLI::ValidationError("--as", "source: this model is decoder-only and reads no source; use prompt or target");
  const bool bos = !options.no_bos;
  // A multilingual model's source and target carry their language's code (the one of
  // their side is required); a code given to a model without codes is a usage error.
  const bool languages = !model.language_codes().empty();
  for (const auto& [field, code] : {std::pair{"source_lang", &options.source_lang},
                                    std::pair{"target_lang", &options.target_lang}})
    if (!languages && !code->empty()) (void)model.language_id(*code, field);
  const auto source_ids = [&](const std::string& text) {
    return languages || !options.source_lang.empty() ? model.tokenize_source(text, options.source_lang)
                                                     : model.tokenize_source(text);
  };
  const auto target_ids = [&](const std::string& text) {
    return languages || !options.target_lang.empty() ? model.tokenize_target(text, options.target_lang)
                                                     : model.tokenize_target(text);
  };
  // generate puts bos before a decoder-only model's prompt only, and a multilingual
  // model's target code before an encoder-decoder one's (ordo::Generator::prepare).
  const auto prompt_ids = [&](const std::string& text) {
    return languages ? model.tokenize_prompt(text, false, options.target_lang)
                     : model.tokenize_prompt(text, bos && decoder_only);
  };
  for (const std::string& text : options.texts) {
    const std::vector<int> ids = role == "source"   ? source_ids(text)
                                 : role == "target" ? target_ids(text)
                                                    : prompt_ids(text);
    const std::vector<std::string> pieces =
        role == "source" ? model.source_pieces(ids) : model.target_pieces(ids);
    if (options.common.json) {
      print_json_line({{"text", text}, {"as", role}, {"ids", ids}, {"pieces", pieces}});
      continue;
    }
    std::cout << role_description(role, model, bos) << ", " << ids.size() << " tokens\n";
    std::string piece_line = "pieces:", id_line = "ids:   ";
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::string piece = printable(pieces[i]), id = std::to_string(ids[i]);
      const std::size_t width = std::max(width_of(piece), id.size());
      piece_line += " " + piece + std::string(width - width_of(piece), ' ');
      id_line += " " + id + std::string(width - id.size(), ' ');
    }
    while (piece_line.ends_with(' ')) piece_line.pop_back();
    while (id_line.ends_with(' ')) id_line.pop_back();
    std::cout << piece_line << '\n' << id_line << '\n';
  }
}

}  // namespace

void setup_tokenize(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* command = app.add_subcommand(
      "tokenize",
      "Show the SentencePiece pieces and ids a model reads for TEXT, exactly as translate,\n"
      "generate and score feed them: by default an encoder-decoder model's source (eos\n"
      "appended) or a decoder-only model's prompt (bos first). The ids go as they are to\n"
      "--source-ids / --prompt-ids. Control characters in pieces are shown as \\n, \\t, \\xNN.");
  command->add_option("text", options->texts, "Text to tokenize (several: one after another)")->required();
  command
      ->add_option("--as", options->as,
                   "Which input the text is: source (encoder; eos appended), target (what score\n"
                   "compares against; eos appended) or prompt (decoder; bos first on a decoder-only\n"
                   "model unless --no-bos). Default: source, or prompt for a decoder-only model")
      ->check(CLI::IsMember({"source", "target", "prompt"}));
  command->add_flag("--no-bos", options->no_bos, "With --as prompt: no bos_token_id first");
  add_language_options(*command, options->source_lang, options->target_lang);
  add_common_options(*command, options->common);
  command->callback([options] { run_tokenize(*options); });
}

}  // namespace ordo::tools
