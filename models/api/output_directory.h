// Where ordo quantize writes a model directory: as the user named it ("out", "out/", ".",
// a symbolic link), new or existing and empty, never over a file. The files are written
// into a partial directory first and moved into place once complete, so that a reader
// never sees half a model and a failed or stopped pass leaves nothing behind.
#pragma once

#include <filesystem>
#include <system_error>

namespace ordo {

class OutputDirectory {
 public:
  // Checks `output` (against `input`, the model read) and makes the partial directory:
  // for a new output, a directory beside it (missing parents made too), renamed to it at
  // the end; for an existing empty one, a directory inside it, whose files then move up,
  // so that the directory itself (permissions, owner, a symbolic link to it) stays as it
  // was. Partial directories a killed pass left (their process gone) are removed first.
  // Throws Error naming `output`: the input itself, a file, a directory that is not
  // empty, a symbolic link to nothing, a path that cannot be examined or written.
  OutputDirectory(const std::filesystem::path& output, const std::filesystem::path& input);
  // Unless committed: removes the partial directory and any parents it made.
  ~OutputDirectory();
  OutputDirectory(const OutputDirectory&) = delete;
  OutputDirectory& operator=(const OutputDirectory&) = delete;

  // Where the files go until commit().
  const std::filesystem::path& partial() const { return partial_; }
  // Throws the Error a failed write into the output is: `file` (the output or a file of
  // it, as the user would name it) and the system's reason.
  [[noreturn]] static void cannot_write(const std::filesystem::path& file, const std::error_code& error);
  // The partial directory into place (for an existing output, config.json last: a
  // directory without it is no model). Never replaces a file: one that appeared since
  // the check (another program writing there) is an Error, and nothing is moved over it.
  void commit();

 private:
  std::filesystem::path named_;    // as the user wrote it, for messages
  std::filesystem::path out_;      // the directory it names
  bool existed_ = false;
  std::filesystem::path partial_;
  std::filesystem::path made_;     // the highest directory made, removed on failure
  bool committed_ = false;
};

}  // namespace ordo
