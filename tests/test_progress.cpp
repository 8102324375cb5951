// The progress bar as a person sees it: ordo runs in a real terminal (tmux, 120 x 30),
// and the test reads the screen (capture-pane) and every byte written to it
// (pipe-pane). A file translated to a file shows a bar that ends on its own line with
// the totals; a stream typed at the terminal, and any stderr that is not a terminal,
// show none. Skipped when tmux is missing (tools/scripts/install_deps.sh --test installs it).
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/cli_runner.h"
#include "tests/model_factory.h"
#include "tools/cli/progress.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using testing_support::run_ordo;
using testing_support::shell_quote;

// Runs a shell command, returns its stdout.
std::string sh(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A tmux server of the test's own (its own socket), killed with the test.
class Terminal {
 public:
  Terminal() : socket_("ordo-test-" + std::to_string(::getpid()) + "-" + std::to_string(next_id()++)) {}
  ~Terminal() { sh(tmux() + " kill-server 2>/dev/null"); }
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  static bool available() { return std::system("tmux -V >/dev/null 2>&1") == 0; }

  // Runs `command` in a fresh 120 x 30 window, recording every byte it writes to
  // `raw`, then "EXIT=<code>" on a line of its own.
  void run(const std::string& command, const fs::path& raw) {
    const std::string script = "sleep 0.3; " + command + "; echo EXIT=$?; sleep 600";
    sh(tmux() + " new-session -d -s t -x 120 -y 30 " + shell_quote(script));
    sh(tmux() + " pipe-pane -o -t t " + shell_quote("cat > " + shell_quote(raw.string())));
  }
  void type(const std::string& keys) { sh(tmux() + " send-keys -t t " + keys); }
  std::string screen() { return sh(tmux() + " capture-pane -p -t t"); }
  // The screen once "EXIT=" shows, or after 120 s.
  std::string wait_for_exit() {
    for (int i = 0; i < 1200; ++i) {
      const std::string s = screen();
      if (s.find("EXIT=") != std::string::npos) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return screen();
  }

 private:
  static int& next_id() {
    static int id = 0;
    return id;
  }
  std::string tmux() const { return "tmux -L " + socket_; }
  std::string socket_;
};

class Progress : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Terminal::available()) GTEST_SKIP() << "tmux is not installed (tools/scripts/install_deps.sh --test installs it)";
  }
  fs::path dir = testing_support::temp_dir("progress");
  std::string ordo = shell_quote(ORDO_CLI);
  std::string data = shell_quote((fs::path(ORDO_SOURCE_DIR) / "weights" / "data" / "test.tsv").string());
};

// Redraws: each drawing starts with \r and ends with clear-to-end-of-line, at most ten
// a second (plus the first and the last). The terminal turns each newline into \r\n:
// those \r are not drawings.
void expect_sparing_redraws(const std::string& raw, double seconds) {
  long redraws = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) redraws += raw[i] == '\r' && (i + 1 == raw.size() || raw[i + 1] != '\n');
  std::size_t clears = 0;
  for (std::size_t at = raw.find("\x1b[K"); at != std::string::npos; at = raw.find("\x1b[K", at + 1)) ++clears;
  EXPECT_GE(redraws, 2);
  EXPECT_GE(clears, static_cast<std::size_t>(redraws) - 1);
  EXPECT_LE(redraws, 2 + static_cast<long>(seconds * 10) + 2) << seconds << " s";
}

TEST_F(Progress, TranslatingAFileShowsABarThatEndsOnItsOwnLine) {
  // 6000 sentences: a few seconds, long enough for the bar to move.
  std::ofstream input(dir / "in.txt");
  const std::vector<std::string> words = {"cats", "dogs", "the small cat", "the big dog", "birds"};
  for (int i = 0; i < 6000; ++i)
    input << words[i % 5] << (i % 2 ? " chase " : " see ") << words[(i / 5) % 5] << '\n';
  input.close();
  Terminal terminal;
  const auto start = std::chrono::steady_clock::now();
  terminal.run(ordo + " translate --threads 1 --input " + shell_quote((dir / "in.txt").string()) + " --output " +
                   shell_quote((dir / "out.txt").string()),
               dir / "raw");
  const std::string screen = terminal.wait_for_exit();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto lines = lines_of(screen);
  ASSERT_GE(lines.size(), 2u) << screen;
  EXPECT_EQ(lines[0].rfind("translate [########################################]  6000/6000 lines  ", 0), 0u)
      << screen;
  EXPECT_NE(lines[0].find(" lines/s  "), std::string::npos) << screen;
  EXPECT_NE(lines[0].find(" tokens/s  "), std::string::npos) << screen;
  EXPECT_LE(lines[0].size(), 119u);
  EXPECT_EQ(lines[1], "EXIT=0") << screen;  // the bar's newline: the next words start a line
  EXPECT_EQ(lines_of(slurp(dir / "out.txt")).size(), 6000u);
  const std::string raw = slurp(dir / "raw");
  expect_sparing_redraws(raw, seconds);
  EXPECT_NE(raw.find("ETA "), std::string::npos) << "no drawing before the last";

  // The same without a terminal on stderr: not a byte of it.
  const auto piped = run_ordo("translate --threads 1 --input " + shell_quote((dir / "in.txt").string()) +
                              " --output " + shell_quote((dir / "out2.txt").string()));
  EXPECT_EQ(piped.exit_code, 0);
  EXPECT_EQ(piped.err, "");
  EXPECT_EQ(slurp(dir / "out2.txt"), slurp(dir / "out.txt"));
}

TEST_F(Progress, AStreamTypedAtTheTerminalShowsNoBar) {
  Terminal terminal;
  terminal.run(ordo + " translate --output " + shell_quote((dir / "out.txt").string()), dir / "raw");
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  terminal.type("'cats chase dogs' Enter C-d");
  const std::string screen = terminal.wait_for_exit();
  EXPECT_NE(screen.find("EXIT=0"), std::string::npos) << screen;
  EXPECT_EQ(screen.find('['), std::string::npos) << screen;
  EXPECT_EQ(slurp(dir / "raw").find('\r' + std::string("translate")), std::string::npos);
  EXPECT_EQ(slurp(dir / "out.txt"), "Katzen jagen Hunde\n");
}

TEST_F(Progress, EvalAndBenchShowOneOnATerminalOnly) {
  Terminal terminal;
  terminal.run(ordo + " eval --data " + data, dir / "raw");
  const auto eval = lines_of(terminal.wait_for_exit());
  ASSERT_GE(eval.size(), 3u);
  EXPECT_EQ(eval[0].rfind("eval [########################################]  2000/2000 sentences  ", 0), 0u) << eval[0];
  EXPECT_EQ(eval[1].rfind("model:", 0), 0u) << eval[1];  // the report starts on the next line
  const auto quiet = run_ordo("eval --data " + data);
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.err, "");

  Terminal bench_terminal;
  const std::string bench = " bench --model " +
                            shell_quote((fs::path(ORDO_SOURCE_DIR) / "weights" / "sinusoidal").string()) +
                            " --batch 1 --src-len 8 --new-tokens 8 --repeats 3 --warmup 1";
  bench_terminal.run(ordo + bench, dir / "raw_bench");
  const std::string screen = bench_terminal.wait_for_exit();
  EXPECT_EQ(screen.rfind("bench [########################################]  4/4 runs  ", 0), 0u) << screen;
  EXPECT_NE(screen.find("EXIT=0"), std::string::npos) << screen;
  EXPECT_EQ(run_ordo(bench).err, "");
}

// The drawing itself, without a terminal: what it says and that it fits.
TEST(ProgressBar, LineSaysDoneRatesAndEtaWithinTheWidth) {
  std::ostringstream out;
  tools::ProgressBar bar("translate", "lines", 2000, out, 80);
  bar.advance(500, 4000);
  // 120 columns: the numbers take 69, the bar its most, 40 cells, a quarter filled.
  const std::string line = bar.line(2.0, false, 120);
  EXPECT_EQ(line, "translate [##########..............................]  500/2000 lines  250 lines/s  2000 tokens/s  ETA 0:06")
      << line;
  EXPECT_EQ(bar.line(2.0, false, 80), "translate [###..........]  500/2000 lines  250 lines/s  2000 tokens/s  ETA 0:06");
  EXPECT_LE(bar.line(2.0, false, 60).size(), 59u);
  EXPECT_EQ(bar.line(2.0, false, 60).find('['), std::string::npos);  // no room for a bar: the numbers only
  EXPECT_EQ(bar.line(2.0, true, 80).find("ETA"), std::string::npos);
  EXPECT_NE(bar.line(2.0, true, 80).find("2.0 s"), std::string::npos);
  bar.finish();
  EXPECT_EQ(out.str().back(), '\n');
  EXPECT_EQ(out.str().front(), '\r');
}

}  // namespace
}  // namespace ordo
