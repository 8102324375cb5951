// The default model is found from where ordo runs (ordo/model.hpp, models/default_model.cpp): the source
// tree's weights/ for binaries in a build tree, <prefix>/share/ordo for an installed or
// moved one, and a clear error when neither is there. Nothing is fixed at build time,
// so a copy of the CLI elsewhere must find (or miss) the model by its own location.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "engine/error.h"
#include "ordo/model.hpp"
#include "tests/cli_runner.h"
#include "tests/model_factory.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using testing_support::shell_quote;
using testing_support::temp_dir;

const fs::path kShippedDefault = fs::path(ORDO_SOURCE_DIR) / "weights" / "sinusoidal";

// Unsets (or sets) $ORDO_MODEL for one test and restores it after.
class ScopedOrdoModel {
 public:
  explicit ScopedOrdoModel(const char* value) {
    if (const char* before = std::getenv("ORDO_MODEL")) saved_ = before;
    if (value)
      ::setenv("ORDO_MODEL", value, 1);
    else
      ::unsetenv("ORDO_MODEL");
  }
  ~ScopedOrdoModel() {
    if (saved_)
      ::setenv("ORDO_MODEL", saved_->c_str(), 1);
    else
      ::unsetenv("ORDO_MODEL");
  }

 private:
  std::optional<std::string> saved_;
};

struct ProgramRun {
  int exit_code = -1;
  std::string out, err;
};

// Runs `binary arguments` with $ORDO_MODEL unset, capturing both streams.
ProgramRun run(const fs::path& binary, const std::string& arguments) {
  const fs::path dir = temp_dir("default-model-run");
  const std::string command = "env -u ORDO_MODEL " + shell_quote(binary.string()) + " " + arguments + " >" +
                              shell_quote((dir / "out").string()) + " 2>" + shell_quote((dir / "err").string());
  const int status = std::system(command.c_str());
  ProgramRun result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::stringstream out, err;
  out << std::ifstream(dir / "out").rdbuf();
  err << std::ifstream(dir / "err").rdbuf();
  result.out = out.str();
  result.err = err.str();
  fs::remove_all(dir);
  return result;
}

TEST(DefaultModel, ABuildTreeBinaryFindsTheSourceTreesWeights) {
  // The test binary lives in <build>/tests/, under the source tree.
  ScopedOrdoModel unset(nullptr);
  EXPECT_EQ(fs::canonical(default_model_directory()), fs::canonical(kShippedDefault));
  EXPECT_EQ(fs::canonical(builtin_model_directory()), fs::canonical(kShippedDefault));
}

TEST(DefaultModel, OrdoModelWinsAndIsTakenAsGiven) {
  ScopedOrdoModel chosen("/nowhere/a-model");
  EXPECT_EQ(default_model_directory(), fs::path("/nowhere/a-model"));
  EXPECT_EQ(fs::canonical(builtin_model_directory()), fs::canonical(kShippedDefault));
}

TEST(DefaultModel, AnInstalledLayoutIsFoundFromTheBinarysOwnPlace) {
  // <prefix>/bin/ordo next to <prefix>/share/ordo/sinusoidal, far from the source tree.
  const fs::path prefix = temp_dir("default-model-prefix");
  fs::create_directories(prefix / "bin");
  fs::create_directories(prefix / "share" / "ordo");
  fs::copy_file(ORDO_CLI, prefix / "bin" / "ordo");
  fs::copy(kShippedDefault, prefix / "share" / "ordo" / "sinusoidal");
  const ProgramRun r = run(prefix / "bin" / "ordo", "translate 'cats chase dogs'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Katzen jagen Hunde\n");
  fs::remove_all(prefix);
}

TEST(DefaultModel, NoModelAnywhereIsAnErrorSayingWhereItLookedAndWhatToDo) {
  const fs::path prefix = temp_dir("default-model-none");
  fs::create_directories(prefix / "bin");
  fs::copy_file(ORDO_CLI, prefix / "bin" / "ordo");
  const ProgramRun r = run(prefix / "bin" / "ordo", "translate 'cats chase dogs'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  const fs::path expected_share = (prefix / "share" / "ordo" / "sinusoidal").lexically_normal();
  EXPECT_NE(r.err.find("looked in " + fs::canonical(prefix).string() + "/share/ordo/sinusoidal"), std::string::npos)
      << r.err << " (expected " << expected_share << ")";
  EXPECT_NE(r.err.find("--model DIR"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("$ORDO_MODEL"), std::string::npos) << r.err;
  // --help still works without a model, and --model still wins.
  EXPECT_EQ(run(prefix / "bin" / "ordo", "translate --help").exit_code, 0);
  const ProgramRun chosen = run(prefix / "bin" / "ordo", "translate --model " + shell_quote(kShippedDefault.string()) +
                                                      " 'cats chase dogs'");
  EXPECT_EQ(chosen.exit_code, 0) << chosen.err;
  EXPECT_EQ(chosen.out, "Katzen jagen Hunde\n");
  fs::remove_all(prefix);
}

}  // namespace
}  // namespace ordo
