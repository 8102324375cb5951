// ordo: translate, score and inspect encoder-decoder Transformers from the terminal.
//
// Exit codes: 0 success; 2 usage error (bad flag, missing argument); 1 anything else,
// with one line on stderr saying what went wrong and what to do (a stream mode has
// reported each failed line on its own first), or without a word when the reader of
// stdout went away.
#include <iostream>
#include <new>
#include <string>

#include "ordo/error.hpp"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/number_flags.h"
#include "tools/cli/openblas_workers.h"

namespace {

std::string command_names(const CLI::App& app) {
  std::string names;
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; }))
    names += (names.empty() ? "" : ", ") + command->get_name();
  return names;
}

// One line, like every other error, pointing at the help of the command at fault.
// CLI11's own words are kept except where they mislead: with no command recognized it
// says only "A subcommand is required", and for "ordo --threads 2 translate" it blames "2".
std::string usage_error(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  std::string message = error.what();
  // The innermost command given ("ordo viz pe --help"), as deep as commands nest.
  std::string help = "ordo";
  for (const CLI::App* command = &app; !command->get_subcommands().empty();) {
    command = command->get_subcommands().front();
    help += " " + command->get_name();
  }
  help += " --help";
  if (first.starts_with('-'))
    message = "'" + first + "' comes before the command; options go after it, as in "
              "ordo translate --threads 2 TEXT (commands: " + command_names(app) + ")";
  else if (app.get_subcommands().empty() && !first.empty())
    message = "unknown command '" + first + "' (commands: " + command_names(app) + ")";
  return "ordo: " + message + " (see " + help + ")";
}

// --help and --version write to stdout like any command: a failed write (a full disk)
// is exit 1 with a line, not success.
int written(int exit_code) {
  std::cout.flush();
  if (std::cout) return exit_code;
  try {
    ordo::tools::throw_write_failure("stdout");
  } catch (const ordo::tools::OutputClosed&) {
    return 1;  // quiet, as below
  } catch (const ordo::Error& e) {
    std::cerr << "ordo: " << e.what() << '\n';
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  ordo::tools::restart_without_openblas_workers(argv);
  CLI::App app{
      "ordo: a minimal Transformer inference engine, encoder-decoder and decoder-only.\n"
      "Loads a model directory (config.json + model.safetensors or its shards +\n"
      "SentencePiece tokenizer.model; ordo's own format or Hugging Face's LLaMA layout)\n"
      "and runs it. Try: ordo translate \"cats chase dogs\""};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ordo 0.1.0");
  ordo::tools::setup_translate(app);
  ordo::tools::setup_generate(app);
  ordo::tools::setup_score(app);
  ordo::tools::setup_inspect(app);
  ordo::tools::setup_compare(app);
  ordo::tools::setup_eval(app);
  ordo::tools::setup_bench(app);
  ordo::tools::setup_viz(app);
  ordo::tools::setup_models(app);
  ordo::tools::setup_tokenize(app);
  ordo::tools::setup_detokenize(app);
  ordo::tools::setup_serve(app);
  ordo::tools::setup_quantize(app);
  ordo::tools::require_plain_numbers(app);

  try {
    app.parse(argc, argv);
    // A command's last words may still sit in the buffer: a full disk or a closed pipe
    // must not pass for success.
    std::cout.flush();
    if (!std::cout) ordo::tools::throw_write_failure("stdout");
  } catch (const CLI::CallForHelp& e) {
    return written(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return written(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return written(app.exit(e));
  } catch (const CLI::ParseError& e) {
    std::cerr << usage_error(app, e, argc, argv) << '\n';
    return 2;
  } catch (const ordo::tools::OutputClosed&) {
    return 1;  // the reader has all it wanted: quiet, as SIGPIPE would have been
  } catch (const ordo::OptionError& e) {
    // A value the model cannot take (--max-input-tokens beyond its positions, say) is
    // found only once the model is loaded, but it is the flag's fault all the same.
    std::cerr << usage_error(app, CLI::ValidationError(ordo::tools::flag_of(e.field()), e.problem()), argc, argv)
              << '\n';
    return 2;
  } catch (const ordo::Error& e) {
    std::cerr << "ordo: " << e.what() << '\n';
    return 1;
  } catch (const std::bad_alloc&) {
    // Not a defect of ordo's: what it needed did not fit (ordo sizes what it can first).
    std::cerr << "ordo: out of memory (is a memory limit, ulimit -v or ulimit -d, set too low? Raise it, or give "
                 "ordo less at once: fewer --threads, a smaller --batch-size, where the command has them)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ordo: internal error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
