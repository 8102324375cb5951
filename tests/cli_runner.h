// Runs the real `ordo` binary (built alongside the tests) and captures what it prints.
#pragma once

#include <string>

namespace ordo::testing_support {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// `arguments` is appended to the binary's path and run by /bin/sh, so quote as in a
// shell. `stdin_text` is fed on standard input.
CommandResult run_ordo(const std::string& arguments, const std::string& stdin_text = "");

// Single-quotes a string for /bin/sh.
std::string shell_quote(const std::string& text);

}  // namespace ordo::testing_support
