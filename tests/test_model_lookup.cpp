// Shipped models by name (ordo/model.hpp: find_model_directory, in models/default_model.cpp): `--model
// german-llama` from any directory, the README's `--model weights/german-llama` from
// outside the source root, `ordo models`, generate's default language model, and an
// unknown name's error listing the shipped ones.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "ordo/model.hpp"
#include "tests/cli_runner.h"
#include "tests/model_factory.h"
#include "tests/reference.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using testing_support::CommandResult;
using testing_support::shell_quote;
using testing_support::temp_dir;

// Runs `ordo arguments` in `directory` with `environment` before it ("env -u ORDO_MODEL").
CommandResult run_in(const fs::path& directory, const std::string& arguments,
                     const std::string& environment = "env -u ORDO_MODEL") {
  const fs::path out = temp_dir("model-lookup");
  const std::string command = "cd " + shell_quote(directory.string()) + " && " + environment + " " +
                              shell_quote(ORDO_CLI) + " " + arguments + " </dev/null >" +
                              shell_quote((out / "out").string()) + " 2>" + shell_quote((out / "err").string());
  const int status = std::system(command.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::stringstream o, e;
  o << std::ifstream(out / "out").rdbuf();
  e << std::ifstream(out / "err").rdbuf();
  result.out = o.str();
  result.err = e.str();
  fs::remove_all(out);
  return result;
}

const fs::path kElsewhere = fs::temp_directory_path();

TEST(ModelLookup, AShippedModelIsNamedFromAnyDirectory) {
  const CommandResult r = run_in(kElsewhere, "generate --model german-llama --max-length 3 'Die Katze'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("Die Katze")) << r.out;
}

TEST(ModelLookup, TheReadmesWeightsPathWorksOutsideTheSourceRoot) {
  const CommandResult r = run_in(kElsewhere, "translate --model weights/sinusoidal 'cats chase dogs'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Katzen jagen Hunde\n");
  const CommandResult llama = run_in(kElsewhere, "inspect --json --model weights/german-llama");
  EXPECT_EQ(llama.exit_code, 0) << llama.err;
}

TEST(ModelLookup, ADirectoryStillWinsOverAName) {
  // A directory called like a shipped model, in the working directory, is the one meant.
  const fs::path here = temp_dir("model-lookup-dir");
  fs::copy(fs::path(ORDO_SOURCE_DIR) / "weights" / "none", here / "german-llama");
  const CommandResult r = run_in(here, "inspect --json --model german-llama");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["directory"], "german-llama");
  fs::remove_all(here);
}

TEST(ModelLookup, AnUnknownNameListsTheShippedModels) {
  const CommandResult r = run_in(kElsewhere, "translate --model no-such-model 'cats'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no-such-model"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("german-llama"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sinusoidal"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ordo models"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
}

TEST(ModelLookup, OrdoModelTakesANameToo) {
  const CommandResult r = run_in(kElsewhere, "generate --max-length 3 'Die Katze'", "ORDO_MODEL=german-llama");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("Die Katze")) << r.out;
}

TEST(ModelLookup, FindModelDirectoryListsTheNamesInItsError) {
  EXPECT_EQ(fs::canonical(find_model_directory("german-llama")),
            fs::canonical(fs::path(ORDO_SOURCE_DIR) / "weights" / "german-llama"));
  const std::string message = reference::error_message([] { find_model_directory("nope"); });
  EXPECT_NE(message.find("shipped models: alibi, german-llama"), std::string::npos) << message;
}

TEST(ModelsCommand, ListsEveryShippedModelWithFamilySchemeAndSize) {
  const CommandResult r = run_in(kElsewhere, "models --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::map<std::string, nlohmann::json> by_name;
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    by_name[j["name"]] = j;
  }
  for (const std::string& name : shipped_model_names()) EXPECT_TRUE(by_name.contains(name)) << name;
  ASSERT_TRUE(by_name.contains("german-llama"));
  const auto& llama = by_name["german-llama"];
  EXPECT_EQ(llama["family"], "llama");
  EXPECT_EQ(llama["kind"], "decoder-only");
  EXPECT_EQ(llama["position_encoding"], "rope");
  EXPECT_GT(llama["parameters"].get<long>(), 0);
  EXPECT_EQ(llama["bytes"].get<std::uintmax_t>(),
            fs::file_size(fs::path(ORDO_SOURCE_DIR) / "weights" / "german-llama" / "model.safetensors"));
  EXPECT_EQ(llama["default_for"], nlohmann::json::array({"generate"}));
  EXPECT_EQ(by_name["alibi"]["position_encoding"], "alibi");
  // The toy translators in Hugging Face layouts are listed by their family.
  EXPECT_EQ(by_name["marian"]["family"], "marian");
  EXPECT_EQ(by_name["marian"]["kind"], "encoder-decoder");
  EXPECT_EQ(by_name["t5"]["family"], "t5");
  EXPECT_EQ(by_name["t5"]["position_encoding"], "t5_relative");
  EXPECT_EQ(by_name["sinusoidal"]["default_for"], nlohmann::json::array({"translate"}));

  const CommandResult table = run_in(kElsewhere, "models");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("t5_relative"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("parameters"), std::string::npos) << table.out;
}

TEST(GenerateDefault, APromptAloneIsContinuedByTheShippedLanguageModel) {
  const CommandResult r = run_in(kElsewhere, "generate --max-length 3 'Die Katze'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("Die Katze")) << r.out;
  // With --source the shipped translation model continues the translation, as before.
  const CommandResult translation = run_in(kElsewhere, "generate --source 'cats chase dogs' Katzen");
  EXPECT_EQ(translation.exit_code, 0) << translation.err;
  EXPECT_EQ(translation.out, "Katzen jagen Hunde\n");
  // $ORDO_MODEL still wins.
  const fs::path chosen = fs::path(ORDO_SOURCE_DIR) / "weights" / "sinusoidal";
  const CommandResult env = run_in(kElsewhere, "generate 'Katzen'", "ORDO_MODEL=" + shell_quote(chosen.string()));
  EXPECT_EQ(env.exit_code, 1);
  EXPECT_NE(env.err.find("encoder-decoder"), std::string::npos) << env.err;
}

}  // namespace
}  // namespace ordo
