// Runs the real `ordo` binary (built alongside the tests) and captures what it prints.
#pragma once

#include <string>
#include <vector>

#include <sys/types.h>

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

// ordo running with pipes on stdin and stdout, so a test can talk to it line by line
// (stderr is the test's own). The destructor kills it if it still runs.
class Running {
 public:
  explicit Running(const std::vector<std::string>& arguments);
  ~Running();
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;

  void write(const std::string& text);
  void close_input();
  // Reads until `count` bytes have arrived or `seconds` pass.
  std::string read_some(std::size_t count, double seconds);
  bool running();
  // Waits for the end; the exit code (-1: killed by a signal).
  int wait();
  // After the end: ordo's own peak resident set in KB (posix_spawn shares no pages with
  // the test, so unlike RUSAGE_CHILDREN after std::system nothing of the test counts).
  long peak_rss_kb() const { return peak_rss_kb_; }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
  long peak_rss_kb_ = 0;
};

}  // namespace ordo::testing_support
