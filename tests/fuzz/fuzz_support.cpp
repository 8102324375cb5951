#include "tests/fuzz/fuzz_support.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace ordo::fuzz {

namespace fs = std::filesystem;

std::vector<std::string_view> split_files(std::string_view input) {
  std::vector<std::string_view> parts;
  for (;;) {
    const std::size_t at = input.find(kFileSeparator);
    parts.push_back(input.substr(0, at));
    if (at == std::string_view::npos) return parts;
    input.remove_prefix(at + kFileSeparator.size());
  }
}

namespace {

// mkdtemp under $TMPDIR (or /tmp), removed by the destructor at normal exit. A crash
// leaves it behind, next to the crash input libFuzzer saved.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ordo-fuzz-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("ordo fuzz: mkdtemp");
      std::abort();
    }
    path_ = pattern;
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  ~ScratchDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

const fs::path& fresh_directory() {
  static const ScratchDirectory directory;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory.path())) fs::remove_all(entry.path());
  return directory.path();
}

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "ordo fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

}  // namespace ordo::fuzz
