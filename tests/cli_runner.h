// Runs the real `ordo` binary (built alongside the tests) and captures what it prints.
#pragma once

#include <filesystem>
#include <optional>
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

// A file's whole contents ("" if it cannot be read).
std::string file_text(const std::filesystem::path& path);

// ordo running with pipes on stdin and stdout, so a test can talk to it line by line
// (stderr is the test's own). The destructor kills it if it still runs.
class Running {
 public:
  // What a run measures besides its output: with PeakMemory, ordo runs under
  // tests/peak_rss_launcher.cpp, so that peak_rss_kb() is ordo's own.
  enum class Measure { Nothing, PeakMemory };
  explicit Running(const std::vector<std::string>& arguments, Measure measure = Measure::Nothing);
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
  // Sends `signal` (SIGTERM, say) to ordo.
  void signal(int signal);
  // Waits at most `seconds` for the end: its exit code, or nullopt if it still runs.
  std::optional<int> wait_for(double seconds);
  // Reads one line of stdout (without its newline), waiting at most `seconds`; what
  // arrived so far when the time runs out or stdout closes.
  std::string read_line(double seconds);
  // After the end of a run made with Measure::PeakMemory: ordo's own peak resident set in
  // KB. (Spawned directly, ordo's ru_maxrss would include the test binary's peak: see
  // tests/peak_rss_launcher.cpp.)
  long peak_rss_kb() const;

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
  std::filesystem::path peak_file_;  // where the launcher writes the peak (PeakMemory)
};

}  // namespace ordo::testing_support
