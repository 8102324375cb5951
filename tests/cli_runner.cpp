#include "tests/cli_runner.h"

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/model_factory.h"

namespace ordo::testing_support {

namespace {
std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}
}  // namespace

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

CommandResult run_ordo(const std::string& arguments, const std::string& stdin_text) {
  const auto dir = temp_dir("cli");
  std::ofstream(dir / "stdin") << stdin_text;
  const std::string command = shell_quote(ORDO_CLI) + " " + arguments + " <" +
                              shell_quote((dir / "stdin").string()) + " >" +
                              shell_quote((dir / "stdout").string()) + " 2>" +
                              shell_quote((dir / "stderr").string());
  const int status = std::system(command.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = slurp(dir / "stdout");
  result.err = slurp(dir / "stderr");
  std::filesystem::remove_all(dir);
  return result;
}

}  // namespace ordo::testing_support
