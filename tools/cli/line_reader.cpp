#include "tools/cli/line_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ordo/error.hpp"

namespace ordo::tools {

namespace {

constexpr std::size_t kBufferBytes = std::size_t{1} << 16;

}  // namespace

LineReader::LineReader(const std::string& path) : name_(path.empty() ? "stdin" : path), buffer_(kBufferBytes) {
  if (path.empty()) {
    fd_ = STDIN_FILENO;
    terminal_ = ::isatty(fd_) != 0;
    return;
  }
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // bytes as they are: the text rule checks them
  if (fd_ < 0) throw Error(path, "cannot open the input file", "check the path and that it is readable");
  owns_fd_ = true;
  struct stat info {};
  if (::fstat(fd_, &info) == 0 && S_ISDIR(info.st_mode)) {
    ::close(fd_);
    throw Error(path, "is a directory, not an input file", "give a file of lines");
  }
}

LineReader::~LineReader() {
  if (owns_fd_) ::close(fd_);
}

bool LineReader::next_batch(std::size_t count, std::vector<std::string>& lines) {
  lines.clear();
  problems_.clear();
  std::string line, problem;
  // After the first line, only lines already on their way: a pause answers what came.
  while (lines.size() < count && (lines.empty() || ready()) && read_line(line, problem)) {
    lines.push_back(std::move(line));
    problems_.push_back(std::move(problem));
    line = std::string();  // a 10 MB line's buffer goes with it, not into the next line
    problem.clear();
  }
  return !lines.empty();
}

bool LineReader::read_line(std::string& line, std::string& problem) {
  std::size_t length = 0;  // of the whole line, held or not
  bool any = false;
  while (true) {
    if (begin_ == end_ && !fill()) {
      if (!any) return false;
      break;  // a last line without a newline
    }
    any = true;
    const char* start = buffer_.data() + begin_;
    const auto* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - begin_));
    const std::size_t part = newline ? static_cast<std::size_t>(newline - start) : end_ - begin_;
    length += part;
    if (length <= kMaxLineBytes)
      line.append(start, part);
    else if (!line.empty())
      line = std::string();  // skipped from here on: its bytes are not held
    begin_ += part + (newline ? 1 : 0);
    if (newline) break;
  }
  if (length > kMaxLineBytes)
    problem = "input line: is longer than " + std::to_string(kMaxLineBytes) + " bytes (" +
              std::to_string(kMaxLineBytes >> 20) + " MiB), ordo's limit for one line (split it; it was skipped, "
              "not read into memory)";
  else if (!line.empty() && line.back() == '\r')
    line.pop_back();
  ++lines_;
  return true;
}

bool LineReader::fill() {
  begin_ = end_ = 0;
  if (failed_) return false;
  ssize_t got = 0;
  do got = ::read(fd_, buffer_.data(), buffer_.size());
  while (got < 0 && errno == EINTR);
  if (got < 0) failed_ = true;
  if (got <= 0) return false;
  end_ = static_cast<std::size_t>(got);
  return true;
}

bool LineReader::ready() const {
  if (std::memchr(buffer_.data() + begin_, '\n', end_ - begin_) != nullptr) return true;
  pollfd poll_fd{fd_, POLLIN, 0};
  return ::poll(&poll_fd, 1, 0) == 1;  // data, or the end of input (POLLHUP): either way no wait
}

std::string LineReader::where(std::size_t number) const { return name_ + " line " + std::to_string(number) + ": "; }

std::size_t LineReader::count_lines(const std::string& path) {
  std::error_code error;
  if (path.empty() || !std::filesystem::is_regular_file(path, error)) return 0;
  std::ifstream in(path, std::ios::binary);
  std::size_t lines = 0;
  char last = '\n';
  std::vector<char> block(1 << 16);
  while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0) {
    const auto got = static_cast<std::size_t>(in.gcount());
    lines += static_cast<std::size_t>(std::count(block.data(), block.data() + got, '\n'));
    last = block[got - 1];
  }
  return lines + (last != '\n' ? 1 : 0);
}

void LineReader::check_read() const {
  if (failed_) throw Error(name_, "reading failed after line " + std::to_string(lines_));
}

}  // namespace ordo::tools
