// A progress bar on stderr for jobs whose size is known up front (a file to translate,
// a test set, benchmark runs):
//
//   translate [##########..........]  1000/2000 lines  410 lines/s  3120 tokens/s  ETA 0:02
//
// Only for a person watching: a command shows it when stderr is a terminal, and never
// into a log or a pipe, which stay exactly as they were. It is redrawn in place ("\r",
// then clear to the end of the line) at most ten times a second, fits the terminal's
// width, and ends with the totals and a newline, so that what follows starts on a line
// of its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <string>

namespace ordo::tools {

// stderr is a terminal (a person is watching it).
bool stderr_is_terminal();

class ProgressBar {
 public:
  // `label` names the job ("translate"), `unit` what is counted ("lines", "runs") out of
  // `total` (0: unknown; then no bar and no ETA). Nothing is ever written unless
  // `shown`. `out` is where it goes (std::cerr; a test may pass its own stream and a
  // width).
  ProgressBar(std::string label, std::string unit, std::size_t total, bool shown);
  ProgressBar(std::string label, std::string unit, std::size_t total, std::ostream& out, int width);
  // Erases an unfinished bar (an error is on its way), so the message starts a clean line.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` more units finished, producing `tokens` output tokens. Redraws when a tenth
  // of a second has passed since the last drawing.
  void advance(std::size_t done, std::size_t tokens = 0);
  // Takes the bar off the line, for a message to print; the next advance() redraws it.
  void clear();
  // The last drawing, with the elapsed time instead of the ETA, and a newline.
  void finish();

  // The text of one drawing, `width` columns at most (exposed for tests).
  std::string line(double elapsed_s, bool final, int width) const;

 private:
  void draw(bool final);

  std::string label_, unit_;
  std::size_t total_ = 0, done_ = 0, tokens_ = 0;
  std::ostream* out_ = nullptr;  // null: not shown
  int width_ = 0;                // 0: the terminal's, asked at each drawing
  bool drawn_ = false;           // a bar is on the line now
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace ordo::tools
