// Opening a file a model directory names (config.json, weights, shards, the shard index,
// tokenizer models): only regular files, and never a wait. open() on a FIFO blocks until
// a writer comes (a model.safetensors that was a FIFO hung ordo forever) and a device
// reads without end, so every such file is opened here, with O_NONBLOCK, and refused by
// what fstat says it is before a byte is read. The one place that check lives.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace ordo {

class RegularFile {
 public:
  // Opens `path` read-only. Throws Error "<path>: is not a regular file (a FIFO)" for
  // anything else, "<path>: cannot open: <reason>" when it cannot be opened.
  static RegularFile open(const std::filesystem::path& path);

  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  int fd() const { return fd_; }
  std::uint64_t size() const { return size_; }  // as fstat saw it at open
  // Hands the descriptor over (the caller closes it).
  int release();

  // The whole file. Throws Error naming `path` when it holds more than `max_bytes`
  // (`what` says what the file is: "a config.json") or a read fails.
  std::string read_all(std::uint64_t max_bytes, const std::string& what) const;

 private:
  RegularFile(std::filesystem::path path, int fd, std::uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// RegularFile::open(path).read_all(max_bytes, what).
std::string read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, const std::string& what);

// Whether `path` exists, for the files a model directory may hold: an error (a parent
// that cannot be searched) reads as absent instead of throwing, and a file that is there
// but cannot be read is named by the open that follows.
bool exists_quietly(const std::filesystem::path& path);

}  // namespace ordo
