// What the libFuzzer targets share: a per-process scratch directory for parsers that
// read files, the split of one input into several files, and the rule that ordo::Error
// is a normal outcome.
//
// A target returns normally when ordo accepts the input or refuses it with ordo::Error;
// anything else (another exception, a crash, a sanitizer report, a leak, a timeout, an
// allocation past -rss_limit_mb) is a finding that libFuzzer reports and saves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "engine/error.h"

namespace ordo::fuzz {

// The input as text.
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Several files in one input, separated by this line; seeds are written the same way
// (tests/fuzz/make_corpus.py).
inline constexpr std::string_view kFileSeparator = "\n--ordo-fuzz-file--\n";

// The parts of `input` between separators: always at least one, possibly empty.
std::vector<std::string_view> split_files(std::string_view input);

// A directory of this process's own, emptied by every call (so that no file of an
// earlier input is seen) and removed when the process exits normally.
const std::filesystem::path& fresh_directory();

// Writes `bytes` to `path`; a failure to write is not ordo's finding, so it aborts.
void write_file(const std::filesystem::path& path, std::string_view bytes);

// Runs `body`, treating ordo::Error as a normal outcome.
template <class Body>
void refusal_is_fine(Body&& body) {
  try {
    body();
  } catch (const ordo::Error&) {
  }
}

}  // namespace ordo::fuzz
