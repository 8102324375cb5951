// The input of a stream mode (translate or generate without TEXT): one item per line of
// --input FILE or of stdin.
//
// Every line counts, empty ones included, so that output line i answers input line i;
// a trailing \r (a file saved on Windows) is dropped; a last line without a newline is
// read like any other. A line is held in memory once, whatever its length: how much of
// a long line is tokenized is the model's business (Model::InputLimit), so a 10 MB line
// costs 10 MB, not millions of tokens. A line longer than kMaxLineBytes is not held at
// all: it is an error for that line (problem()), its bytes are skipped as they are read,
// and the stream goes on (`--input /dev/zero` runs in constant memory instead of growing
// until it fails).
//
// A batch ends when the input pauses: next_batch() returns the lines it has as soon as
// no further byte is ready, so a program that writes a line and waits for its answer
// (`coproc ordo translate`) gets it; a file or a fast pipe still fills whole batches.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ordo::tools {

class LineReader {
 public:
  // The longest line read, in bytes (16 MiB). Above the 10 MB line README promises to
  // handle (a --truncate user may feed a whole document as one line), and small enough
  // that a batch of 32 such lines stays within half a gigabyte; no sentence comes near.
  static constexpr std::size_t kMaxLineBytes = std::size_t{16} << 20;

  // `path` empty: stdin. Throws Error when the file cannot be opened.
  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Replaces `lines` with up to `count` further lines, fewer when the input pauses after
  // at least one; false when none was left.
  bool next_batch(std::size_t count, std::vector<std::string>& lines);
  // Why line i of the last batch could not be read, or "" when it was. A line longer
  // than kMaxLineBytes reads as "" with its problem set.
  const std::string& problem(std::size_t i) const { return problems_[i]; }

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
  // Reads one line into `line` (its problem into `problem`); false at the end of input.
  bool read_line(std::string& line, std::string& problem);
  // Refills the buffer; false at the end of input or on an error.
  bool fill();
  // A whole line is buffered, or a byte (or the end of input) is ready on the file
  // without waiting.
  bool ready() const;

  std::string name_;
  int fd_ = 0;
  bool owns_fd_ = false;
  bool terminal_ = false;
  bool failed_ = false;
  std::vector<char> buffer_;
  std::size_t begin_ = 0, end_ = 0;  // the unread bytes of buffer_
  std::size_t lines_ = 0;
  std::vector<std::string> problems_;
};

}  // namespace ordo::tools
