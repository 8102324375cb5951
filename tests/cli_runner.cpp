#include "tests/cli_runner.h"

#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/model_factory.h"

extern char** environ;

namespace ordo::testing_support {

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

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
  result.out = file_text(dir / "stdout");
  result.err = file_text(dir / "stderr");
  std::filesystem::remove_all(dir);
  return result;
}

Running::Running(const std::vector<std::string>& arguments, Measure measure) {
  int in[2], out[2];
  if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  for (int fd : {in[0], in[1], out[0], out[1]}) posix_spawn_file_actions_addclose(&actions, fd);
  std::vector<char*> argv;
  std::string peak_file;
  if (measure == Measure::PeakMemory) {
    peak_file_ = temp_dir("peak_rss") / "peak_kb";
    peak_file = peak_file_.string();
    argv = {const_cast<char*>(ORDO_PEAK_RSS_LAUNCHER), peak_file.data()};
  }
  argv.push_back(const_cast<char*>(ORDO_CLI));
  for (const std::string& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  if (posix_spawn(&pid_, argv.front(), &actions, nullptr, argv.data(), environ) != 0)
    throw std::runtime_error("cannot start ordo");
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  to_ = in[1];
  from_ = out[0];
}

Running::~Running() {
  if (to_ >= 0) ::close(to_);
  if (pid_ > 0 && !exited_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  ::close(from_);
}

void Running::write(const std::string& text) {
  ASSERT_EQ(::write(to_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
}

void Running::close_input() {
  ::close(to_);
  to_ = -1;
}

std::string Running::read_some(std::size_t count, double seconds) {
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (text.size() < count && std::chrono::steady_clock::now() < deadline) {
    pollfd p{from_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buffer[256];
    const ssize_t n = ::read(from_, buffer, std::min(sizeof buffer, count - text.size()));
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

bool Running::running() {
  if (exited_) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    exited_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return !exited_;
}

long Running::peak_rss_kb() const {
  if (peak_file_.empty()) throw std::logic_error("peak_rss_kb() needs Running(..., Measure::PeakMemory)");
  if (!exited_) throw std::logic_error("peak_rss_kb() before the run ended");
  long kb = -1;
  std::ifstream(peak_file_) >> kb;
  return kb;
}

void Running::signal(int signal) {
  if (pid_ > 0 && !exited_) ::kill(pid_, signal);
}

std::optional<int> Running::wait_for(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    ::usleep(20000);
  }
  return exit_code_;
}

std::string Running::read_line(double seconds) {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{from_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char c;
    if (::read(from_, &c, 1) != 1) break;
    if (c == '\n') return line;
    line += c;
  }
  return line;
}

int Running::wait() {
  if (!exited_) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exited_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return exit_code_;
}

}  // namespace ordo::testing_support
