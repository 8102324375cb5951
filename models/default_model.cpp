#include "models/default_model.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

#include "engine/error.h"

namespace ordo {

namespace fs = std::filesystem;

namespace {

bool has_config(const fs::path& directory) {
  std::error_code error;
  return fs::is_regular_file(directory / "config.json", error);
}

// The directory of a file, its symlinks resolved; empty when it cannot be resolved.
fs::path directory_of(const fs::path& file) {
  std::error_code error;
  const fs::path resolved = fs::canonical(file, error);
  return error ? fs::path() : resolved.parent_path();
}

// Where to look from: the file this code was loaded from (libordo.so when ordo is a
// shared library, else the program it is linked into) and the running program. Both
// are the same file for the CLI; for a program linked to an installed libordo.so, the
// first finds the prefix the library was installed in.
std::vector<fs::path> anchors() {
  std::vector<fs::path> result;
  const auto add = [&](const fs::path& directory) {
    if (directory.empty()) return;
    for (const auto& known : result)
      if (known == directory) return;
    result.push_back(directory);
  };
  Dl_info info{};
  // dladdr names the main program by argv[0], which may be relative to another
  // directory: only an absolute name is trusted; /proc/self/exe covers the rest.
  if (dladdr(reinterpret_cast<void*>(&builtin_model_directory), &info) != 0 && info.dli_fname != nullptr &&
      fs::path(info.dli_fname).is_absolute())
    add(directory_of(info.dli_fname));
  add(directory_of("/proc/self/exe"));
  return result;
}

}  // namespace

fs::path builtin_model_directory() {
  const std::vector<fs::path> from = anchors();
  std::string looked;
  // An installed prefix first: <prefix>/bin/ordo or <prefix>/lib/libordo.so, or
  // Debian's multiarch <prefix>/lib/x86_64-linux-gnu/libordo.so one level deeper.
  for (const auto& directory : from) {
    for (const char* up : {"..", "../.."}) {
      const fs::path installed = (directory / up / "share" / "ordo" / kDefaultModelName).lexically_normal();
      if (has_config(installed)) return installed;
      looked += (looked.empty() ? "" : ", ") + installed.string();
    }
  }
  // A binary in a build tree: the source tree's weights/ is in an ancestor directory.
  for (const auto& directory : from) {
    for (fs::path up = directory;; up = up.parent_path()) {
      const fs::path shipped = up / "weights" / kDefaultModelName;
      if (has_config(shipped)) return shipped;
      if (up == up.parent_path()) break;
    }
    looked += ", weights/" + std::string(kDefaultModelName) + " in " + directory.string() + " and every directory above";
  }
  if (from.empty()) looked = "nowhere: neither the library's file nor /proc/self/exe could be resolved";
  throw Error("default model", "no " + std::string(kDefaultModelName) + "/config.json found; looked in " + looked,
              "pass a model directory (ordo --model DIR, ordo::Model::load(DIR)) or set $ORDO_MODEL to one; "
              "`cmake --install` puts the shipped models in <prefix>/share/ordo");
}

fs::path default_model_directory() {
  if (const char* chosen = std::getenv("ORDO_MODEL"); chosen != nullptr && *chosen != '\0') return chosen;
  return builtin_model_directory();
}

}  // namespace ordo
