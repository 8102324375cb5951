// Where the default model is, found from where ordo runs, never from a path fixed at
// build time: an installed ordo (bin/ordo, lib/libordo.so) has it in
// <prefix>/share/ordo/, a binary in a build tree in the source tree's weights/. So a
// prefix can be moved, and a build directory can live anywhere under the source tree.
//
// The declarations are public (ordo/model.hpp: default_model_directory, shipped_model_names,
// find_model_directory, ...). builtin_model_directory() looks from two places: the file
// ordo's code was loaded from (libordo.so, or the program it is linked into) and the
// running program (/proc/self/exe). From each, first <dir>/../share/ordo/sinusoidal (an
// installed prefix; or <dir>/../../share/ordo/..., for lib/<multiarch>/), then
// <dir>/weights/sinusoidal in <dir> and each directory above (a build tree inside the
// source tree).
#include "ordo/model.hpp"

#include <dlfcn.h>

#include <algorithm>
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

// $ORDO_MODEL when set and not empty: a directory as given, or a shipped model's name.
std::optional<fs::path> chosen_model() {
  const char* chosen = std::getenv("ORDO_MODEL");
  if (chosen == nullptr || *chosen == '\0') return std::nullopt;
  std::error_code error;
  if (!fs::is_directory(chosen, error))
    if (std::optional<fs::path> shipped = shipped_model(chosen)) return shipped;
  return fs::path(chosen);
}

}  // namespace

// The directory holding the shipped models: the first place, in the order
// builtin_model_directory() documents, that holds the default model.
fs::path shipped_models_directory() {
  const std::vector<fs::path> from = anchors();
  std::string looked;
  // An installed prefix first: <prefix>/bin/ordo or <prefix>/lib/libordo.so, or
  // Debian's multiarch <prefix>/lib/x86_64-linux-gnu/libordo.so one level deeper.
  for (const auto& directory : from) {
    for (const char* up : {"..", "../.."}) {
      const fs::path installed = (directory / up / "share" / "ordo").lexically_normal();
      if (has_config(installed / kDefaultModelName)) return installed;
      looked += (looked.empty() ? "" : ", ") + (installed / kDefaultModelName).string();
    }
  }
  // A binary in a build tree: the source tree's weights/ is in an ancestor directory.
  for (const auto& directory : from) {
    for (fs::path up = directory;; up = up.parent_path()) {
      if (has_config(up / "weights" / kDefaultModelName)) return up / "weights";
      if (up == up.parent_path()) break;
    }
    looked += ", weights/" + std::string(kDefaultModelName) + " in " + directory.string() + " and every directory above";
  }
  if (from.empty()) looked = "nowhere: neither the library's file nor /proc/self/exe could be resolved";
  throw Error("default model", "no " + std::string(kDefaultModelName) + "/config.json found; looked in " + looked,
              "pass a model directory (ordo --model DIR, ordo::Model::load(DIR)) or set $ORDO_MODEL to one; "
              "`cmake --install` puts the shipped models in <prefix>/share/ordo");
}

fs::path builtin_model_directory() { return shipped_models_directory() / kDefaultModelName; }

std::vector<std::string> shipped_model_names() {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(shipped_models_directory(), error))
    if (has_config(entry.path())) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<fs::path> shipped_model(const std::string& name) {
  fs::path wanted(name);
  // "weights/NAME" is how the README spells a shipped model from the source root.
  if (wanted.parent_path() == "weights") wanted = wanted.filename();
  if (wanted.empty() || wanted.has_parent_path() || wanted == "." || wanted == "..") return std::nullopt;
  try {
    const fs::path found = shipped_models_directory() / wanted;
    if (has_config(found)) return found;
  } catch (const Error&) {
    // No shipped models beside this ordo: the name names nothing.
  }
  return std::nullopt;
}

fs::path find_model_directory(const std::string& given) {
  std::error_code error;
  if (given.empty() || fs::is_directory(given, error)) return given;
  if (std::optional<fs::path> found = shipped_model(given)) return *found;
  std::string names;
  try {
    for (const std::string& name : shipped_model_names()) names += (names.empty() ? "" : ", ") + name;
  } catch (const Error&) {
  }
  throw Error(given, "is neither a model directory nor the name of a shipped model",
              names.empty() ? std::string("no shipped models were found beside ordo; give a directory holding "
                                          "config.json, model.safetensors and tokenizer.model")
                            : "shipped models: " + names +
                                  " (ordo models lists them); or give a directory holding config.json, "
                                  "model.safetensors and tokenizer.model");
}

fs::path default_model_directory() {
  if (std::optional<fs::path> chosen = chosen_model()) return *chosen;
  return builtin_model_directory();
}

fs::path default_language_model_directory() {
  if (std::optional<fs::path> chosen = chosen_model()) return *chosen;
  const fs::path shipped = shipped_models_directory() / kDefaultLanguageModelName;
  if (!has_config(shipped))
    throw Error("default language model", "no " + std::string(kDefaultLanguageModelName) + "/config.json in " +
                                              shipped.parent_path().string() + ", beside the default model",
                "pass a decoder-only model directory (ordo generate --model DIR) or set $ORDO_MODEL to one");
  return shipped;
}

}  // namespace ordo
