#include "engine/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "engine/error.h"

namespace ordo {

namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

}  // namespace

RegularFile RegularFile::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  // O_NONBLOCK: a FIFO without a writer opens at once instead of waiting; for a regular
  // file it changes nothing (reads of regular files never block in that sense).
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int error = errno;
    throw Error(name, std::string("cannot open: ") + std::strerror(error),
                error == ENOENT ? "a model directory holds config.json, model.safetensors and its tokenizer"
                                : "check that it is readable");
  }
  RegularFile file(path, fd, 0);
  struct stat status {};
  if (fstat(fd, &status) != 0) throw Error(name, std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(status.st_mode))
    throw Error(name, "is not a regular file (" + kind_of(status.st_mode) + ")",
                "a model directory holds plain files; replace it with the file itself");
  file.size_ = static_cast<std::uint64_t>(status.st_size);
  return file;
}

RegularFile::RegularFile(RegularFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

int RegularFile::release() { return std::exchange(fd_, -1); }

std::string RegularFile::read_all(std::uint64_t max_bytes, const std::string& what) const {
  const std::string name = path_.string();
  if (size_ > max_bytes)
    throw Error(name, "is " + std::to_string(size_) + " bytes, more than " + what + " can be (" +
                          std::to_string(max_bytes) + ")");
  std::string text;
  text.resize(static_cast<std::size_t>(size_));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pread(fd_, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(name, std::string("cannot read: ") + std::strerror(errno));
    if (n == 0) break;  // shrank since fstat: read what is there
    done += static_cast<std::size_t>(n);
  }
  text.resize(done);
  return text;
}

std::string read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, const std::string& what) {
  return RegularFile::open(path).read_all(max_bytes, what);
}

bool exists_quietly(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::exists(path, error);
}

}  // namespace ordo
