// The ordo command line as a user meets it: exit codes, one-line errors, JSON shapes.
// Runs the real binary on small random models (ids only; the shipped models and their
// tokenizer are exercised in test_showcase).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/model_factory.h"

namespace ordo {
namespace {

using testing_support::file_text;
using testing_support::run_ordo;
using testing_support::shell_quote;

class Cli : public ::testing::Test {
 protected:
  // One random model for the whole suite, written on first use.
  static std::string model() {
    static const std::filesystem::path dir = [] {
      auto d = testing_support::temp_dir("cli_model");
      testing_support::write_random_model(d, testing_support::tiny_config(), 5);
      return d;
    }();
    return "--model " + shell_quote(dir.string());
  }
};

// Errors are one line on stderr, prefixed "ordo: ".
void expect_one_line_error(const testing_support::CommandResult& r) {
  EXPECT_EQ(r.err.rfind("ordo: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(Cli, UsageErrorsExitWithTwo) {
  EXPECT_EQ(run_ordo("").exit_code, 2);
  EXPECT_EQ(run_ordo("frobnicate").exit_code, 2);
  EXPECT_EQ(run_ordo("translate --no-such-flag").exit_code, 2);
  EXPECT_EQ(run_ordo("translate --threads -3 x").exit_code, 2);
  EXPECT_EQ(run_ordo("score " + model() + " --source a").exit_code, 2);  // --target missing
  EXPECT_EQ(run_ordo("score " + model()).exit_code, 2);                 // nothing to score
  EXPECT_EQ(run_ordo("compare onlyone").exit_code, 2);
}

// Usage errors are one line too, and say where the help is.
TEST_F(Cli, UsageErrorsAreOneLineWithAPointerToHelp) {
  auto r = run_ordo("translate --no-such-flag");
  expect_one_line_error(r);
  EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(see ordo translate --help)"), std::string::npos) << r.err;

  r = run_ordo("frobnicate");
  expect_one_line_error(r);
  EXPECT_NE(r.err.find("unknown command 'frobnicate' (commands: translate, generate, score, inspect, compare, eval, "
                       "bench, viz, models, tokenize, detokenize, serve, quantize)"),
            std::string::npos)
      << r.err;

  r = run_ordo("viz pe --scheme cosine --out x.png");  // the help of the innermost command
  EXPECT_EQ(r.exit_code, 2);
  expect_one_line_error(r);
  EXPECT_NE(r.err.find("(see ordo viz pe --help)"), std::string::npos) << r.err;

  r = run_ordo("--threads 2 translate x");  // options before the command
  EXPECT_EQ(r.exit_code, 2);
  expect_one_line_error(r);
  EXPECT_NE(r.err.find("'--threads' comes before the command"), std::string::npos) << r.err;

  r = run_ordo("translate --max-length abc x");  // what is wrong with the value, briefly
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--max-length: 'abc' is not a number"), std::string::npos) << r.err;

  r = run_ordo("score " + model());
  EXPECT_EQ(r.exit_code, 2);
  expect_one_line_error(r);
  EXPECT_NE(r.err.find("(see ordo score --help)"), std::string::npos) << r.err;
}

// An empty value is a value: it is reported, never mistaken for "not given" (which for
// translate would mean "read stdin" and hang on a terminal).
TEST_F(Cli, EmptyValuesAreErrorsNotAbsences) {
  auto r = run_ordo("translate " + model() + " --source-ids ''", "5 8 1\n");
  EXPECT_EQ(r.exit_code, 1);
  expect_one_line_error(r);
  EXPECT_NE(r.err.find("--source-ids: no token ids given"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");

  r = run_ordo("score " + model() + " --source-ids '' --target-ids '1'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--source-ids: no token ids given"), std::string::npos) << r.err;
}

TEST_F(Cli, HelpTeachesAndExitsWithZero) {
  const auto r = run_ordo("translate --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--source-ids"), std::string::npos);
  EXPECT_NE(r.out.find("--max-length"), std::string::npos);
  EXPECT_NE(r.out.find("--json"), std::string::npos);
}

// --help and --version write like any other command: when the write fails (a full
// disk), exit 1 with one line on stderr. Before, both exited 0 into /dev/full.
TEST_F(Cli, HelpAndVersionReportAFailedWrite) {
  const auto dir = testing_support::temp_dir("full");
  for (const char* arguments : {"--help", "--version", "translate --help"}) {
    SCOPED_TRACE(arguments);
    const std::string command =
        shell_quote(ORDO_CLI) + " " + arguments + " >/dev/full 2>" + shell_quote((dir / "err").string());
    const int status = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 1);
    EXPECT_EQ(file_text(dir / "err"), "ordo: stdout: writing the output failed (is the disk full, or the pipe closed?)\n");
  }
  std::filesystem::remove_all(dir);
}

// A command lists only the flags it uses. eval and compare use the best translation
// alone (no --n-best); inspect and viz pe compute nothing (no --threads). Before, each
// was listed in --help and silently ignored; now it is unknown: a usage error.
TEST_F(Cli, CommandsListOnlyFlagsTheyUse) {
  struct Case {
    std::string command, flag, required;  // what the command needs besides
  };
  const std::string data = shell_quote(std::string(ORDO_SOURCE_DIR) + "/weights/data/test.tsv");
  const auto dir = testing_support::temp_dir("dropped_flags");  // where an accepted viz would draw
  for (const auto& [command, flag, required] :
       {Case{"eval", "--n-best", "--data " + data}, Case{"compare", "--n-best", "a b"}, Case{"inspect", "--threads", ""},
        Case{"viz pe", "--threads", "--out " + shell_quote((dir / "never.png").string())}}) {
    SCOPED_TRACE(command + " " + flag);
    const auto help = run_ordo(command + " --help");
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_EQ(help.out.find(" " + flag + " "), std::string::npos) << help.out;
    const auto r = run_ordo(command + " " + required + " " + flag + " 2");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
  }
  std::filesystem::remove_all(dir);
}

// viz pe without --model draws a scheme's own table: --compute-type and --group-size
// would convert weights it does not have. Before, they were taken and did nothing; now
// they are a usage error naming the flag. With --model they convert it as every command
// does (a position table stays float32, so the picture is the same).
TEST_F(Cli, VizPeRefusesComputeTypeWithoutAModel) {
  const auto dir = testing_support::temp_dir("viz_compute_type");
  const std::string out = "--out " + shell_quote((dir / "pe.csv").string());
  for (const std::string flags : {"--compute-type int8", "--compute-type int4 --group-size 64", "--group-size 32"}) {
    SCOPED_TRACE(flags);
    const auto r = run_ordo("viz pe --scheme sinusoidal " + out + " " + flags);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("draws only with --model DIR"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "pe.csv"));
  }
  const std::string model = shell_quote(std::string(ORDO_SOURCE_DIR) + "/weights/learned");
  const auto plain = run_ordo("viz pe --scheme learned --model " + model + " " + out);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const std::string want = file_text(dir / "pe.csv");
  const auto converted = run_ordo("viz pe --scheme learned --model " + model + " " + out + " --compute-type int4");
  ASSERT_EQ(converted.exit_code, 0) << converted.err;
  EXPECT_EQ(file_text(dir / "pe.csv"), want);
  std::filesystem::remove_all(dir);
}

// Path options say what they take, FILE or DIR, never TEXT (CLI11's default).
TEST_F(Cli, PathOptionsSayFileOrDir) {
  struct Case {
    std::string command, flag, kind;
  };
  const std::vector<Case> cases = {
      {"translate", "--input", "FILE"}, {"translate", "--output", "FILE"}, {"translate", "--model", "DIR"},
      {"generate", "--input", "FILE"},  {"generate", "--output", "FILE"},  {"score", "--model", "DIR"},
      {"inspect", "--model", "DIR"},    {"eval", "--data", "FILE"},       {"eval", "--model", "DIR"},
      {"compare", "--plot", "FILE"},    {"compare", "--model", "DIR"},    {"bench", "--model", "DIR"},
      {"viz pe", "--out", "FILE"},      {"viz pe", "--model", "DIR"},     {"viz attention", "--out", "FILE"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.command + " " + c.flag);
    const auto help = run_ordo(c.command + " --help");
    ASSERT_EQ(help.exit_code, 0);
    std::istringstream lines(help.out);
    std::string shown;  // the word after the flag on its help line
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string names;
      words >> names;  // "-m,--model" or "--input"
      if (names == c.flag || names.ends_with("," + c.flag)) words >> shown;
    }
    EXPECT_TRUE(shown.starts_with(c.kind)) << "'" << shown << "' in\n" << help.out;
    EXPECT_EQ(shown.find("TEXT"), std::string::npos) << shown;
  }
}

TEST_F(Cli, OtherErrorsExitWithOneAndOneLine) {
  auto r = run_ordo("translate --model /nonexistent/model x");
  EXPECT_EQ(r.exit_code, 1);
  expect_one_line_error(r);
  EXPECT_NE(r.err.find("/nonexistent/model"), std::string::npos);

  r = run_ordo("translate " + model() + " --source-ids '5 x 2'");
  EXPECT_EQ(r.exit_code, 1);
  expect_one_line_error(r);
  EXPECT_NE(r.err.find("'x' is not a token id"), std::string::npos) << r.err;

  r = run_ordo("translate " + model() + " --source-ids '5 99 1'");
  EXPECT_EQ(r.exit_code, 1);
  expect_one_line_error(r);
  EXPECT_NE(r.err.find("id 99"), std::string::npos) << r.err;

  r = run_ordo("translate " + model() + " 'cats chase dogs'");  // this model has no tokenizer
  EXPECT_EQ(r.exit_code, 1);
  expect_one_line_error(r);
  EXPECT_NE(r.err.find("--source-ids"), std::string::npos) << r.err;
}

TEST_F(Cli, TranslateIdsJson) {
  const auto r = run_ordo("translate " + model() + " --source-ids '5 8 1' --max-length 6 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["source_ids"], (std::vector<int>{5, 8, 1}));
  EXPECT_GE(json["target_ids"].size(), 1u);
  EXPECT_LE(json["target_ids"].size(), 6u);
  EXPECT_LE(json["score"].get<double>(), 0.0);
}

TEST_F(Cli, ScoreMatchesTranslateScore) {
  const auto t = run_ordo("translate " + model() + " --source-ids '5 8 1' --max-length 6 --json");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const auto translation = nlohmann::json::parse(t.out);
  std::string ids;
  for (int id : translation["target_ids"]) ids += std::to_string(id) + " ";
  const auto s = run_ordo("score " + model() + " --source-ids '5 8 1' --target-ids '" + ids + "' --json");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto score = nlohmann::json::parse(s.out);
  const auto logprobs = score["token_logprobs"].get<std::vector<double>>();
  EXPECT_EQ(logprobs.size(), translation["target_ids"].size());
  EXPECT_NEAR(std::accumulate(logprobs.begin(), logprobs.end(), 0.0), score["logprob"].get<double>(), 1e-4);
  EXPECT_NEAR(score["logprob"].get<double>(), translation["score"].get<double>(), 1e-3);
}

TEST_F(Cli, InspectListsConfigAndTensors) {
  const auto r = run_ordo("inspect " + model() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["config"]["d_model"], 16);
  EXPECT_EQ(json["config"]["position_encoding"], "sinusoidal");  // defaults filled in
  EXPECT_GT(json["parameters"].get<long>(), 0);
  bool found = false;
  for (const auto& t : json["tensors"])
    if (t["name"] == "model.shared.weight") {
      found = true;
      EXPECT_EQ(t["dtype"], "F32");
      EXPECT_EQ(t["shape"], (std::vector<int>{23, 16}));
    }
  EXPECT_TRUE(found);
  const auto text = run_ordo("inspect " + model());
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("model.decoder.layers.1.encoder_attn.q_proj.weight"), std::string::npos);
}

// The tokenizer line says what the model has, once: its pieces, or none and which ids to
// pass instead (a decoder-only model reads a prompt). Before, a model with a tokenizer
// was also said to have none.
TEST_F(Cli, InspectSaysWhetherTheModelHasATokenizerOnce) {
  const auto with = run_ordo("inspect --model " + shell_quote(std::string(ORDO_SOURCE_DIR) + "/weights/sinusoidal"));
  ASSERT_EQ(with.exit_code, 0) << with.err;
  EXPECT_NE(with.out.find("\ntokenizer: 344 pieces\n"), std::string::npos) << with.out;
  EXPECT_EQ(with.out.find("tokenizer: none"), std::string::npos) << with.out;
  const auto without = run_ordo("inspect " + model());
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_NE(without.out.find("\ntokenizer: none (use --source-ids / --target-ids)\n"), std::string::npos) << without.out;
  const auto lm_dir = testing_support::temp_dir("cli_lm");
  nlohmann::json lm = testing_support::tiny_config();
  lm["encoder_layers"] = 0;
  testing_support::write_random_model(lm_dir, lm, 5);
  const auto decoder_only = run_ordo("inspect --model " + shell_quote(lm_dir.string()));
  ASSERT_EQ(decoder_only.exit_code, 0) << decoder_only.err;
  EXPECT_NE(decoder_only.out.find("\ntokenizer: none (use --prompt-ids / --target-ids)\n"), std::string::npos)
      << decoder_only.out;
}

// A typo in ORDO_CPU is an error that names the variable, never a silent fallback.
TEST_F(Cli, AnUnknownOrdoCpuValueIsAnErrorThatNamesIt) {
  const char* before = std::getenv("ORDO_CPU");
  const std::optional<std::string> saved = before ? std::optional<std::string>(before) : std::nullopt;
  ::setenv("ORDO_CPU", "avx9", 1);
  const auto result = run_ordo("translate 'cats chase dogs'");
  if (saved)
    ::setenv("ORDO_CPU", saved->c_str(), 1);
  else
    ::unsetenv("ORDO_CPU");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err,
            "ordo: environment variable ORDO_CPU: unknown value 'avx9' (the values are 'auto', the default, "
            "'avx512', 'avx2' and 'portable')\n");
}

}  // namespace
}  // namespace ordo
