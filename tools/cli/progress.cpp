#include "tools/cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace ordo::tools {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);

int terminal_width() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

std::string rate(double count, double seconds) {
  char text[32];
  const double r = seconds > 0 ? count / seconds : 0.0;
  std::snprintf(text, sizeof text, r < 10 ? "%.1f" : "%.0f", r);
  return text;
}

std::string clock_time(double seconds) {
  const long s = std::lround(std::max(seconds, 0.0));
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%ld:%02ld", s / 60, s % 60);
  return text;
}

}  // namespace

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

ProgressBar::ProgressBar(std::string label, std::string unit, std::size_t total, bool shown)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), out_(shown ? &std::cerr : nullptr),
      start_(Clock::now()), last_draw_(start_) {
  if (out_ != nullptr) draw(false);  // at once: the job has started
}

ProgressBar::ProgressBar(std::string label, std::string unit, std::size_t total, std::ostream& out, int width)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), out_(&out), width_(width),
      start_(Clock::now()), last_draw_(start_) {
  draw(false);
}

ProgressBar::~ProgressBar() {
  if (!finished_) clear();
}

void ProgressBar::advance(std::size_t done, std::size_t tokens) {
  done_ += done;
  tokens_ += tokens;
  if (out_ != nullptr && Clock::now() - last_draw_ >= kRedrawEvery) draw(false);
}

void ProgressBar::clear() {
  if (out_ == nullptr || !drawn_) return;
  *out_ << "\r\x1b[K" << std::flush;
  drawn_ = false;
}

void ProgressBar::finish() {
  if (out_ == nullptr || finished_) return;
  draw(true);
  *out_ << '\n' << std::flush;
  finished_ = true;
}

std::string ProgressBar::line(double elapsed_s, bool final, int width) const {
  const double done = static_cast<double>(done_);
  std::string counts = total_ > 0 ? std::to_string(done_) + "/" + std::to_string(total_) : std::to_string(done_);
  std::string text = "  " + counts + " " + unit_ + "  " + rate(done, elapsed_s) + " " + unit_ + "/s";
  if (tokens_ > 0) text += "  " + rate(static_cast<double>(tokens_), elapsed_s) + " tokens/s";
  if (final) {
    char took[32];
    std::snprintf(took, sizeof took, "  %.1f s", elapsed_s);
    text += took;
  } else if (total_ > 0 && done_ > 0) {
    text += "  ETA " + clock_time(elapsed_s / done * static_cast<double>(total_ - std::min(done_, total_)));
  }
  // The bar takes what is left of the line, 10 to 40 columns; without room, no bar.
  // One column stays free: writing the last one makes some terminals wrap.
  const int room = width - 1 - static_cast<int>(label_.size() + text.size()) - 3;
  std::string bar;
  if (total_ > 0 && room >= 10) {
    const int cells = std::min(room, 40);
    const int filled = static_cast<int>(std::min(1.0, done / static_cast<double>(total_)) * cells);
    bar = " [" + std::string(static_cast<std::size_t>(filled), '#') +
          std::string(static_cast<std::size_t>(cells - filled), '.') + "]";
  }
  std::string out = label_ + bar + text;
  if (static_cast<int>(out.size()) > width - 1) out.resize(static_cast<std::size_t>(std::max(width - 1, 0)));
  return out;
}

void ProgressBar::draw(bool final) {
  if (out_ == nullptr) return;
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  *out_ << '\r' << line(elapsed, final, width_ > 0 ? width_ : terminal_width()) << "\x1b[K" << std::flush;
  drawn_ = true;
  last_draw_ = now;
}

}  // namespace ordo::tools
