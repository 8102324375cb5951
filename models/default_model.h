// Where the default model is, found from where ordo runs, never from a path fixed at
// build time: an installed ordo (bin/ordo, lib/libordo.so) has it in
// <prefix>/share/ordo/, a binary in a build tree in the source tree's weights/. So a
// prefix can be moved, and a build directory can live anywhere under the source tree.
#pragma once

#include <filesystem>

namespace ordo {

// The directory name of the default model, under share/ordo/ or weights/.
inline constexpr const char* kDefaultModelName = "sinusoidal";

// The shipped default model next to the running code, looked for from two places: the
// file ordo's code was loaded from (libordo.so, or the program it is linked into) and
// the running program (/proc/self/exe). From each, first <dir>/../share/ordo/sinusoidal
// (an installed prefix; or <dir>/../../share/ordo/..., for lib/<multiarch>/), then <dir>/weights/sinusoidal in <dir> and each directory above
// (a build tree inside the source tree). Throws Error naming every place it looked and
// what to do ($ORDO_MODEL, --model) when none holds config.json.
std::filesystem::path builtin_model_directory();

// $ORDO_MODEL when it is set and not empty (a user's choice, not checked here: loading
// it reports what is wrong), else builtin_model_directory(), whose Error it throws.
std::filesystem::path default_model_directory();

}  // namespace ordo
