#include "models/api/output_directory.h"

#include <signal.h>
#include <stdio.h>  // renameat2 (glibc 2.28)
#include <fcntl.h>  // AT_FDCWD
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <system_error>
#include <vector>

#include "engine/error.h"
#include "engine/printable.h"

namespace ordo {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPartial = ".partial-";

// The directory `output` names: "out/" is "out", as a shell's completion writes it.
fs::path named_directory(const fs::path& output) {
  const fs::path normal = output.lexically_normal();
  return normal.has_filename() || !normal.has_parent_path() ? normal : normal.parent_path();
}

// A partial directory of a pass whose process is gone ("<prefix>.partial-PID-N"): what a
// killed ordo quantize left (SIGKILL, the machine stopping). A live process's is kept.
bool stale_partial(const std::string& name, const std::string& prefix) {
  if (!name.starts_with(prefix + std::string(kPartial))) return false;
  const std::string rest = name.substr(prefix.size() + kPartial.size());
  const std::size_t dash = rest.find('-');
  if (dash == 0 || dash == std::string::npos || rest.find_first_not_of("0123456789-") != std::string::npos) return false;
  const pid_t pid = static_cast<pid_t>(std::stol(rest.substr(0, dash)));
  return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
}

void remove_stale_partials(const fs::path& dir, const std::string& prefix) {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error))
    if (stale_partial(entry.path().filename().string(), prefix)) fs::remove_all(entry.path(), error);
}

// rename(2) that never replaces `to`: EEXIST when something is there.
std::error_code rename_without_replacing(const fs::path& from, const fs::path& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return {};
  std::error_code error(errno, std::generic_category());
  if (error != std::errc::invalid_argument && error != std::errc::function_not_supported) return error;
  // A file system without RENAME_NOREPLACE: check, then rename (a race remains there).
  std::error_code ignored;
  if (fs::exists(fs::symlink_status(to, ignored))) return std::make_error_code(std::errc::file_exists);
  fs::rename(from, to, error);
  return error;
}

}  // namespace

void OutputDirectory::cannot_write(const fs::path& file, const std::error_code& error) {
  throw Error(file.string(), "cannot be written: " + error.message(),
              "choose a directory you can write to, on a disk with room");
}

OutputDirectory::OutputDirectory(const fs::path& output, const fs::path& input)
    : named_(output), out_(named_directory(output)) {
  std::error_code error;
  if (fs::equivalent(out_, input, error))
    throw Error(named_.string(), "is the input directory", "write the converted model to a new directory");
  const fs::file_status status = fs::status(out_, error);
  if (error && status.type() != fs::file_type::not_found) {
    std::error_code ignored;
    if (fs::is_symlink(fs::symlink_status(out_, ignored)) && error == std::errc::too_many_symbolic_link_levels)
      throw Error(named_.string(), "is a symbolic link that leads back to itself", "choose another directory");
    throw Error(named_.string(), "cannot be examined: " + error.message(), "choose a directory you can reach");
  }
  if (status.type() == fs::file_type::not_found && fs::is_symlink(fs::symlink_status(out_, error)))
    throw Error(named_.string(), "is a symbolic link to " + printable(fs::read_symlink(out_, error).string()) +
                                     ", which does not exist",
                "create the directory it names, or choose another");
  existed_ = status.type() != fs::file_type::not_found;
  static std::atomic<int> counter{0};
  const std::string suffix = std::string(kPartial) + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  if (existed_) {
    if (!fs::is_directory(status)) throw Error(named_.string(), "exists and is not a directory", "choose a new directory");
    remove_stale_partials(out_, "");
    if (!fs::is_empty(out_, error))
      throw Error(named_.string(), "exists and is not empty", "choose a new directory: ordo quantize never writes over files");
    partial_ = out_ / suffix;
  } else {
    const fs::path parent = out_.has_parent_path() ? out_.parent_path() : fs::path(".");
    // Appended, not "." + string: g++ 12's -Wrestrict misfires on that (GCC bug 105329).
    std::string name(1, '.');
    name.append(out_.filename().string()).append(suffix);
    partial_ = parent / name;
    for (fs::path p = parent; !p.empty() && !fs::exists(p, error); p = p.parent_path()) made_ = p;
    if (fs::exists(parent, error)) remove_stale_partials(parent, name.substr(0, name.size() - suffix.size()));
  }
  if (made_.empty()) made_ = partial_;
  fs::create_directories(partial_, error);
  if (error) {
    std::error_code ignored;
    fs::remove_all(made_, ignored);  // the parents made before the failure
    cannot_write(named_, error);
  }
}

OutputDirectory::~OutputDirectory() {
  if (committed_) return;
  std::error_code ignored;
  fs::remove_all(made_, ignored);
  if (made_ != partial_) fs::remove_all(partial_, ignored);
}

void OutputDirectory::commit() {
  const auto move = [&](const fs::path& from, const fs::path& to) {
    const std::error_code error = rename_without_replacing(from, to);
    if (error == std::errc::file_exists || error == std::errc::directory_not_empty)
      throw Error(named_.string(), "gained '" + printable(to.filename().string()) + "' while ordo quantize wrote it",
                  "another program writes there; choose a directory of your own");
    if (error) cannot_write(named_, error);
  };
  if (!existed_) {
    move(partial_, out_);
  } else {
    // A move that fails takes back the ones before it: the directory is as it was.
    std::vector<fs::path> moved;
    try {
      std::error_code error;
      for (const fs::directory_entry& entry : fs::directory_iterator(partial_, error))
        if (entry.path().filename() != "config.json") {
          move(entry.path(), out_ / entry.path().filename());
          moved.push_back(out_ / entry.path().filename());
        }
      if (error) cannot_write(named_, error);
      move(partial_ / "config.json", out_ / "config.json");
    } catch (...) {
      std::error_code ignored;
      for (const fs::path& file : moved) fs::remove(file, ignored);
      throw;
    }
    std::error_code ignored;
    fs::remove(partial_, ignored);
  }
  committed_ = true;
}

}  // namespace ordo
