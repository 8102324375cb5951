// Where the default model is, found from where ordo runs, never from a path fixed at
// build time: an installed ordo (bin/ordo, lib/libordo.so) has it in
// <prefix>/share/ordo/, a binary in a build tree in the source tree's weights/. So a
// prefix can be moved, and a build directory can live anywhere under the source tree.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ordo {

// The directory name of the default model, under share/ordo/ or weights/.
inline constexpr const char* kDefaultModelName = "sinusoidal";
// The shipped decoder-only language model: what `ordo generate` runs by default.
inline constexpr const char* kDefaultLanguageModelName = "german-llama";

// The shipped default model next to the running code, looked for from two places: the
// file ordo's code was loaded from (libordo.so, or the program it is linked into) and
// the running program (/proc/self/exe). From each, first <dir>/../share/ordo/sinusoidal
// (an installed prefix; or <dir>/../../share/ordo/..., for lib/<multiarch>/), then <dir>/weights/sinusoidal in <dir> and each directory above
// (a build tree inside the source tree). Throws Error naming every place it looked and
// what to do ($ORDO_MODEL, --model) when none holds config.json.
std::filesystem::path builtin_model_directory();

// $ORDO_MODEL when it is set and not empty (a user's choice, not checked here: loading
// it reports what is wrong; a shipped model's name, "german-llama", is looked up), else builtin_model_directory(), whose Error it throws.
std::filesystem::path default_model_directory();

// $ORDO_MODEL when it is set and not empty, else the shipped language model
// (kDefaultLanguageModelName beside the default model); throws as builtin_model_directory().
std::filesystem::path default_language_model_directory();

// The directory the shipped models live in (<prefix>/share/ordo or the source tree's
// weights/): the parent of builtin_model_directory(), whose Error it throws.
std::filesystem::path shipped_models_directory();

// The shipped models' names (directories holding config.json there), sorted.
std::vector<std::string> shipped_model_names();

// The shipped model called `name` ("german-llama", or "weights/german-llama" as the
// README spells it from the source root); nullopt when there is none by that name or
// no shipped models at all.
std::optional<std::filesystem::path> shipped_model(const std::string& name);

// A model as a user names it (--model, $ORDO_MODEL): `given` itself when it is a
// directory (or empty, for Model::load to report), else the shipped model of that name.
// Throws Error listing the shipped names when it is neither.
std::filesystem::path find_model_directory(const std::string& given);

}  // namespace ordo
