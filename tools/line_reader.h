// The input of a stream mode (translate or generate without TEXT): one item per line of
// --input FILE or of stdin.
//
// Every line counts, empty ones included, so that output line i answers input line i;
// a trailing \r (a file saved on Windows) is dropped; a last line without a newline is
// read like any other. A line is held in memory once, whatever its length: how much of
// a long line is tokenized is the model's business (Model::InputLimit), so a 10 MB line
// costs 10 MB, not millions of tokens.
#pragma once

#include <cstddef>
#include <fstream>
#include <istream>
#include <string>
#include <vector>

namespace ordo::tools {

class LineReader {
 public:
  // `path` empty: stdin. Throws Error when the file cannot be opened.
  explicit LineReader(const std::string& path);

  // Replaces `lines` with up to `count` further lines; false when none was left.
  bool next_batch(std::size_t count, std::vector<std::string>& lines);

  // The prefix of a message about line `number` (from 1): "stdin line 7: ".
  std::string where(std::size_t number) const;
  // Lines read so far.
  std::size_t lines_read() const { return lines_; }
  // stdin is a terminal: a person typing, to be answered line by line.
  bool from_terminal() const { return terminal_; }
  // Throws Error when reading failed before the end of the input (an I/O error).
  void check_read() const;

  // How many lines a regular file `path` holds, counted as next_batch() reads them (a
  // last line without a newline counts); 0 when it is not a regular file (a pipe, a
  // terminal: no way to know without reading it). For a progress bar's total.
  static std::size_t count_lines(const std::string& path);

 private:
  std::string name_;
  std::ifstream file_;
  std::istream* in_;
  bool terminal_ = false;
  std::size_t lines_ = 0;
};

}  // namespace ordo::tools
