#include "tools/line_reader.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "engine/error.h"

namespace ordo::tools {

LineReader::LineReader(const std::string& path) : name_(path.empty() ? "stdin" : path), in_(&std::cin) {
  if (path.empty()) {
    terminal_ = ::isatty(STDIN_FILENO) != 0;
    return;
  }
  file_.open(path, std::ios::binary);  // bytes as they are: the text rule checks them
  if (!file_) throw Error(path, "cannot open the input file", "check the path and that it is readable");
  in_ = &file_;
}

bool LineReader::next_batch(std::size_t count, std::vector<std::string>& lines) {
  lines.clear();
  std::string line;
  while (lines.size() < count && std::getline(*in_, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    line = std::string();  // a 10 MB line's buffer goes with it, not into the next line
    ++lines_;
  }
  return !lines.empty();
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
  if (in_->bad()) throw Error(name_, "reading failed after line " + std::to_string(lines_));
}

}  // namespace ordo::tools
