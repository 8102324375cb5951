// --verbose (tools/cli/run_report.h): after a run, stderr holds load time, tokens in and
// out, and prefill and decode rates, with counts that agree with what the run did.
// Oracle: the ids the same run reports with --json.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"

namespace ordo {
namespace {

using testing_support::CommandResult;
using testing_support::run_ordo;

// The number after `label` in the report, as `what` matched; -1 when absent.
double number_after(const std::string& report, const std::string& pattern) {
  std::smatch match;
  if (!std::regex_search(report, match, std::regex(pattern))) return -1;
  return std::stod(match[1]);
}

void expect_report(const std::string& err, long in, long out) {
  EXPECT_GE(number_after(err, R"(ordo: load +([0-9.]+) s)"), 0) << err;
  EXPECT_EQ(number_after(err, R"(ordo: prefill +([0-9]+) tokens in [0-9.]+ s = +[0-9.]+ tokens/s)"), in) << err;
  // The first output token comes from the prefill's logits, each later one from a step.
  EXPECT_EQ(number_after(err, R"(ordo: decode +([0-9]+) tokens in [0-9.]+ s = +[0-9.]+ tokens/s)"), out - 1) << err;
  EXPECT_EQ(number_after(err, R"(ordo: tokens +in [0-9]+, out ([0-9]+))"), out) << err;
  EXPECT_EQ(number_after(err, R"(ordo: tokens +in ([0-9]+))"), in) << err;
  EXPECT_GE(number_after(err, R"(ordo: total +([0-9.]+) s)"), 0) << err;
}

TEST(VerboseCli, TranslateReportsLoadTokensAndRates) {
  const CommandResult json = run_ordo("translate --json 'cats chase dogs'");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  const CommandResult r = run_ordo("translate --verbose 'cats chase dogs'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Katzen jagen Hunde\n");
  expect_report(r.err, static_cast<long>(j["source_ids"].size()), static_cast<long>(j["target_ids"].size()));
  // Without --verbose, not a word.
  EXPECT_EQ(run_ordo("translate 'cats chase dogs'").err, "");
}

TEST(VerboseCli, GenerateReportsThePromptsPrefillAndTheDecode) {
  const CommandResult json = run_ordo("generate --json --max-length 6 'Die Katze'");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  const CommandResult r = run_ordo("generate -v --max-length 6 'Die Katze'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_report(r.err, static_cast<long>(j["prompt_ids"].size()), static_cast<long>(j["generated_ids"].size()));
}

TEST(VerboseCli, AFailedRunPrintsItsErrorNotAReport) {
  const CommandResult r = run_ordo("translate --verbose --source-ids '99999'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.find("ordo: load"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ordo
