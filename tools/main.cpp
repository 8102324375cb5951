// ordo: translate, score and inspect encoder-decoder Transformers from the terminal.
//
// Exit codes: 0 success; 2 usage error (bad flag, missing argument); 1 anything else,
// with one line on stderr saying what went wrong and what to do.
#include <iostream>

#include "engine/error.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "ordo: a minimal encoder-decoder Transformer inference engine.\n"
      "Loads a model directory (config.json + model.safetensors + SentencePiece model)\n"
      "and runs it. Try: ordo translate \"cats chase dogs\""};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ordo 0.1.0");
  ordo::tools::setup_translate(app);
  ordo::tools::setup_score(app);
  ordo::tools::setup_inspect(app);
  ordo::tools::setup_compare(app);
  ordo::tools::setup_eval(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const ordo::Error& e) {
    std::cerr << "ordo: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ordo: internal error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
