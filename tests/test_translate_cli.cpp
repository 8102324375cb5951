// `ordo translate` (and the decoding flags of eval and compare) as a user meets them,
// on the shipped default model: n-best text and JSON, scores, cut hypotheses, usage
// errors for bad decoding flags, files in and out, batching and sampling that do not
// change the output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/model_factory.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using testing_support::run_ordo;
using testing_support::Running;
using testing_support::shell_quote;

fs::path weights_dir() { return fs::path(ORDO_SOURCE_DIR) / "weights"; }

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::size_t line_count(const std::string& text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')); }

// The first `count` rows of weights/data/test.tsv: sources, and the rows themselves.
struct TestRows {
  std::vector<std::string> sources;
  std::vector<std::string> rows;
};

TestRows test_rows(std::size_t count) {
  std::ifstream in(weights_dir() / "data" / "test.tsv");
  EXPECT_TRUE(in);
  TestRows result;
  std::string line;
  while (result.rows.size() < count && std::getline(in, line)) {
    result.rows.push_back(line);
    result.sources.push_back(line.substr(0, line.find('\t')));
  }
  EXPECT_EQ(result.rows.size(), count);
  return result;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines) text += l + '\n';
  return text;
}

// A temp directory for the files of one test, removed at its end.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) : path_(testing_support::temp_dir(tag)) {}
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string quoted(const fs::path& path) { return shell_quote(path.string()); }

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// ---------------------------------------------------------------------------------
// 1-3. n-best text and JSON, scores, cut hypotheses

// Marian's n-best form: "index ||| text ||| score", best first. The oracle for the best
// translation is the training data (weights/README.md); the scores shown are the
// ranking (normalized) scores, so non-increasing by the beam search's contract.
TEST(TranslateCli, NBestTextIsMarianStyleBestFirst) {
  const auto r = run_ordo("translate --beam 4 --n-best 3 'cats chase dogs'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto lines = split_lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  std::vector<double> scores;
  std::vector<std::string> texts;
  for (const std::string& line : lines) {
    const auto first = line.find(" ||| "), second = line.rfind(" ||| ");
    ASSERT_NE(first, std::string::npos) << line;
    ASSERT_NE(first, second) << line;
    EXPECT_EQ(line.substr(0, first), "0") << line;  // the input's index, from 0
    texts.push_back(line.substr(first + 5, second - first - 5));
    std::size_t used = 0;
    scores.push_back(std::stod(line.substr(second + 5), &used));
    EXPECT_EQ(used, line.size() - second - 5) << line;  // the score is the whole field
    EXPECT_LT(scores.back(), 0.0) << line;
  }
  EXPECT_EQ(texts[0], "Katzen jagen Hunde");
  EXPECT_TRUE(std::is_sorted(scores.rbegin(), scores.rend())) << r.out;

  // Two sentences: indexes 0 then 1, three lines each.
  const auto two = run_ordo("translate --beam 4 --n-best 3 'cats chase dogs' 'dogs chase cats'");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const auto both = split_lines(two.out);
  ASSERT_EQ(both.size(), 6u) << two.out;
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(both[i].substr(0, 5), i < 3 ? "0 |||" : "1 |||") << both[i];
  EXPECT_EQ(both[3], "1 ||| Hunde jagen Katzen" + both[3].substr(both[3].rfind(" ||| ")));
}

TEST(TranslateCli, NBestJsonHasEveryHypothesisWithItsTokenLogprobs) {
  const auto r = run_ordo("translate --json --beam 4 --n-best 3 'cats chase dogs'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(line_count(r.out), 1u) << r.out;  // one object per input
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["source"], "cats chase dogs");
  EXPECT_TRUE(json.contains("source_ids"));
  EXPECT_FALSE(json.contains("translation"));  // those are per hypothesis
  ASSERT_TRUE(json.contains("hypotheses"));
  ASSERT_EQ(json["hypotheses"].size(), 3u);
  EXPECT_EQ(json["hypotheses"][0]["translation"], "Katzen jagen Hunde");
  double previous = INFINITY;
  for (const auto& h : json["hypotheses"]) {
    for (const char* key : {"translation", "target_ids", "score", "token_logprobs", "normalized_score", "finished"})
      EXPECT_TRUE(h.contains(key)) << key << " in " << h.dump();
    const auto ids = h["target_ids"].get<std::vector<int>>();
    const auto logprobs = h["token_logprobs"].get<std::vector<double>>();
    ASSERT_EQ(logprobs.size(), ids.size());
    // score is the sum of the token log-probs: both come from the same floats, summed
    // in double, so they agree to double rounding (1e-9 relative is ~1e7 ulps of room
    // for the decimal round trip, and far below a dropped or doubled token).
    const double sum = std::accumulate(logprobs.begin(), logprobs.end(), 0.0);
    const double score = h["score"].get<double>();
    EXPECT_NEAR(score, sum, 1e-9 * std::abs(sum)) << h.dump();
    // normalized_score = score / length^1 (length_penalty 1 by default, eos counted).
    EXPECT_NEAR(h["normalized_score"].get<double>(), score / static_cast<double>(ids.size()), 1e-9 * std::abs(score));
    EXPECT_TRUE(h["finished"].get<bool>());
    EXPECT_EQ(ids.back(), 1);  // finished hypotheses end in eos
    EXPECT_LE(h["normalized_score"].get<double>(), previous);  // best first
    previous = h["normalized_score"].get<double>();
  }
}

TEST(TranslateCli, OneBestJsonIsFlatAndBeamOneIsGreedy) {
  const auto greedy = run_ordo("translate --json 'cats chase dogs'");
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  const auto json = nlohmann::json::parse(greedy.out);
  for (const char* key : {"source", "source_ids", "translation", "target_ids", "score", "finished"})
    EXPECT_TRUE(json.contains(key)) << key << " in " << greedy.out;
  EXPECT_FALSE(json.contains("hypotheses"));
  EXPECT_EQ(json["translation"], "Katzen jagen Hunde");

  // Beam search with K = 1 is greedy search, bit for bit (search.h): the same text,
  // ids and scores to the last digit. --n-best 1 with a wider beam is flat too.
  const auto beam_one = run_ordo("translate --json --beam 1 'cats chase dogs'");
  ASSERT_EQ(beam_one.exit_code, 0) << beam_one.err;
  EXPECT_EQ(beam_one.out, greedy.out);
  const auto beam_four = run_ordo("translate --json --beam 4 --n-best 1 'cats chase dogs'");
  ASSERT_EQ(beam_four.exit_code, 0) << beam_four.err;
  const auto flat = nlohmann::json::parse(beam_four.out);
  EXPECT_FALSE(flat.contains("hypotheses"));
  EXPECT_EQ(flat["translation"], "Katzen jagen Hunde");
  EXPECT_EQ(flat["target_ids"], json["target_ids"]);
}

// A hypothesis cut at --max-length says so. The oracle: the full translation of this
// sentence is longer than 2 tokens (checked first), so 2 cannot hold it.
TEST(TranslateCli, CutHypothesesAreNotFinished) {
  const std::string sentence = "'The big dog sees a small cat.'";
  const auto full = run_ordo("translate --json " + sentence);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  const auto whole = nlohmann::json::parse(full.out);
  EXPECT_EQ(whole["translation"], "Der große Hund sieht eine kleine Katze.");
  EXPECT_TRUE(whole["finished"].get<bool>());
  ASSERT_GT(whole["target_ids"].size(), 2u);

  for (const char* search : {"", " --beam 4"}) {
    SCOPED_TRACE(search);
    const auto r = run_ordo(std::string("translate --json --max-length 2") + search + " " + sentence);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto cut = nlohmann::json::parse(r.out);
    EXPECT_FALSE(cut["finished"].get<bool>()) << r.out;
    ASSERT_EQ(cut["target_ids"].size(), 2u) << r.out;
    EXPECT_NE(cut["target_ids"].back(), 1) << r.out;  // no eos: it was cut
    if (*search == '\0') {  // greedy cut at 2 is the first 2 tokens of greedy uncut
      EXPECT_EQ(cut["target_ids"][0], whole["target_ids"][0]);
      EXPECT_EQ(cut["target_ids"][1], whole["target_ids"][1]);
    }
  }
  // In n-best JSON every cut hypothesis says so too.
  const auto r = run_ordo("translate --json --max-length 2 --beam 3 --n-best 3 " + sentence);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json["hypotheses"].size(), 3u);
  int unfinished = 0;
  for (const auto& h : json["hypotheses"]) {
    EXPECT_EQ(h["finished"].get<bool>(), h["target_ids"].back() == 1) << h.dump();  // eos <=> finished
    unfinished += !h["finished"].get<bool>();
  }
  EXPECT_GE(unfinished, 1);
}

// ---------------------------------------------------------------------------------
// 4. Bad decoding flags are usage errors

// Exit code 2, nothing on stdout, one line on stderr naming the flag (as given on the
// command line, not the field name), pointing at the command's help.
void expect_usage_error(const std::string& command, const std::string& arguments, const std::string& flag) {
  SCOPED_TRACE(command + " " + arguments);
  const auto r = run_ordo(command + " " + arguments);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(line_count(r.err), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("ordo: " + flag + ": ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("(see ordo " + command + " --help)"), std::string::npos) << r.err;
}

TEST(TranslateCli, BadDecodingFlagsAreUsageErrorsNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--beam 0", "--beam"},
      {"--n-best 5 --beam 4", "--n-best"},
      {"--sample --temperature 0", "--temperature"},
      {"--sample --temperature -1", "--temperature"},
      {"--sample --top-p 0", "--top-p"},
      {"--sample --top-p 1.5", "--top-p"},
      {"--sample --top-k -1", "--top-k"},
      {"--batch-size 0", "--batch-size"},
      {"--sample --beam 2", "--sample"},
      {"--min-length 9 --max-length 3", "--min-length"},
  };
  for (const auto& [arguments, flag] : cases) expect_usage_error("translate", arguments + " 'cats chase dogs'", flag);
  // The same flags, the same checks, on the other commands that decode.
  const std::string data = quoted(weights_dir() / "data" / "test.tsv");
  expect_usage_error("eval", "--data " + data + " --beam 0", "--beam");
  expect_usage_error("eval", "--data " + data + " --batch-size 0", "--batch-size");
  expect_usage_error("eval", "--data " + data + " --sample --beam 2", "--sample");
  expect_usage_error("compare", "'cats chase dogs' 'dogs chase cats' --beam 0", "--beam");
  expect_usage_error("compare", "'cats chase dogs' 'dogs chase cats' --sample --top-p 2", "--top-p");
  expect_usage_error("compare", "'cats chase dogs' 'dogs chase cats' --batch-size 0", "--batch-size");

  // And the boundaries just inside are accepted: the checks are not off by one.
  for (const char* fine : {"--beam 4 --n-best 4", "--sample --temperature 0.01", "--sample --top-p 1",
                           "--sample --top-k 0", "--batch-size 1", "--min-length 3 --max-length 3"}) {
    SCOPED_TRACE(fine);
    const auto r = run_ordo(std::string("translate ") + fine + " 'cats chase dogs'");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(r.out.empty());
  }
}

// --temperature, --top-k and --top-p shape sampling only: without --sample they were
// silently ignored (greedy output). Now a usage error that says to add --sample, on
// every command that decodes.
TEST(TranslateCli, SamplingFlagsWithoutSampleAreUsageErrors) {
  const std::string data = quoted(weights_dir() / "data" / "test.tsv");
  const std::string llama = quoted(weights_dir() / "german-llama");
  for (const std::string& command : {std::string("translate 'cats chase dogs'"), "generate --model " + llama + " Die",
                                     "eval --data " + data, std::string("compare 'cats chase dogs' 'dogs chase cats'")}) {
    for (const std::string& flag : {std::string("--temperature"), std::string("--top-k"), std::string("--top-p")}) {
      SCOPED_TRACE(command + " " + flag);
      const auto r = run_ordo(command + " " + flag + (flag == "--top-k" ? " 5" : " 0.5"));
      EXPECT_EQ(r.exit_code, 2);
      EXPECT_EQ(line_count(r.err), 1u) << r.err;
      EXPECT_EQ(r.err.rfind("ordo: " + flag + ": shapes only sampling, which is off: add --sample", 0), 0u) << r.err;
      EXPECT_EQ(r.out, "");
    }
  }
  const auto r = run_ordo("translate --sample --temperature 0.5 --top-k 5 --top-p 0.9 'cats chase dogs'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// ---------------------------------------------------------------------------------
// 5-6. Files, batches and sampling do not change the output

TEST(TranslateCli, FilesBatchesAndStdinGiveTheSameLines) {
  const TestRows rows = test_rows(40);
  const TempDir dir("translate_cli");
  const fs::path input = dir / "in.txt";
  std::ofstream(input) << joined(rows.sources);

  const auto piped = run_ordo("translate", joined(rows.sources));
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  // One line per input line, in input order: the oracle for the order is the held-out
  // references, which the default model gets right for >= 98% of sentences
  // (test_showcase): a shuffled output would match almost none.
  const auto lines = split_lines(piped.out);
  ASSERT_EQ(lines.size(), rows.sources.size()) << piped.out;
  std::size_t right = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) right += rows.rows[i] == rows.sources[i] + '\t' + lines[i];
  EXPECT_GE(right, 38u);

  // --input, --output, and batch sizes 1, 2 and 32 (a 40-line input is 40, 20 and 2
  // batches, the last partial): byte for byte the same output. Batches sort by length,
  // so this also checks that results go back to their input lines.
  const auto from_file = run_ordo("translate --input " + quoted(input));
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(from_file.out, piped.out);
  const fs::path output = dir / "out.txt";
  const auto to_file = run_ordo("translate --input " + quoted(input) + " --output " + quoted(output));
  ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
  EXPECT_EQ(to_file.out, "");  // nothing on stdout
  EXPECT_EQ(slurp(output), piped.out);
  for (const char* size : {"1", "2", "32"}) {
    SCOPED_TRACE(size);
    const auto r = run_ordo(std::string("translate --batch-size ") + size + " --input " + quoted(input));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, piped.out);
  }

  // An --output in a directory that does not exist: one line naming it, exit 1.
  const fs::path nowhere = dir / "no" / "such" / "dir" / "out.txt";
  const auto bad = run_ordo("translate --output " + quoted(nowhere) + " 'cats chase dogs'");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.out, "");
  EXPECT_EQ(line_count(bad.err), 1u) << bad.err;
  EXPECT_EQ(bad.err.rfind("ordo: ", 0), 0u) << bad.err;
  EXPECT_NE(bad.err.find(nowhere.string()), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(nowhere));

  // And a missing --input likewise.
  const auto missing = run_ordo("translate --input " + quoted(dir / "missing.txt"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(line_count(missing.err), 1u) << missing.err;
  EXPECT_NE(missing.err.find("missing.txt"), std::string::npos) << missing.err;
}

// --output naming the --input file, by any path (the same inode: the path itself, a
// "./" spelling, a hard link), would empty the input before a line of it is read: a
// usage error before anything is opened, the file as it was. And the output is opened
// only once the input is: a missing --input leaves an existing --output as it was.
// Before, both ended with an empty file (the first with exit 0).
TEST(TranslateCli, OutputNeverDestroysTheInput) {
  const TempDir dir("same_file");
  const fs::path input = dir / "in.txt";
  const std::string text = "cats chase dogs\n";
  fs::create_directory(dir / "sub");
  for (const std::string& command :
       {std::string("translate"), "generate --max-length 2 --model " + quoted(weights_dir() / "german-llama")}) {
    SCOPED_TRACE(command);
    std::ofstream(input) << text;
    fs::remove(dir / "link.txt");
    fs::create_hard_link(input, dir / "link.txt");
    for (const fs::path& output : {input, dir / "sub" / ".." / "in.txt", dir / "link.txt"}) {
      SCOPED_TRACE(output);
      const auto r = run_ordo(command + " --input " + quoted(input) + " --output " + quoted(output));
      EXPECT_EQ(r.exit_code, 2);
      EXPECT_EQ(line_count(r.err), 1u) << r.err;
      EXPECT_NE(r.err.find("ordo: --output: " + output.string() + " is the --input file"), std::string::npos) << r.err;
      EXPECT_EQ(slurp(input), text);
    }
    std::ofstream(dir / "out.txt") << "keep me\n";
    const auto missing = run_ordo(command + " --input " + quoted(dir / "missing.txt") + " --output " + quoted(dir / "out.txt"));
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("missing.txt: cannot open the input file"), std::string::npos) << missing.err;
    EXPECT_EQ(slurp(dir / "out.txt"), "keep me\n");
    // A distinct output is still written.
    const auto fine = run_ordo(command + " --input " + quoted(input) + " --output " + quoted(dir / "out.txt"));
    EXPECT_EQ(fine.exit_code, 0) << fine.err;
    EXPECT_EQ(line_count(slurp(dir / "out.txt")), 1u);
  }
}

// --repetition-penalty divides or multiplies logits by R: far from 1 it overflows them
// (1e-40 turned every logit infinite, and the error blamed the weights). Bounded to
// [0.01, 100] in DecodingOptions::validate, so library users get it too; the ends are
// accepted.
TEST(TranslateCli, RepetitionPenaltyIsBounded) {
  for (const char* bad : {"1e-40", "0.0099", "100.5", "1e30"}) {
    SCOPED_TRACE(bad);
    const auto r = run_ordo(std::string("translate --repetition-penalty ") + bad + " 'cats chase dogs'");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("ordo: --repetition-penalty: must be in [0.01, 100]"), std::string::npos) << r.err;
  }
  for (const char* fine : {"0.01", "1.2", "100"}) {
    SCOPED_TRACE(fine);
    const auto r = run_ordo(std::string("translate --repetition-penalty ") + fine + " 'cats chase dogs'");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(r.out.empty());
  }
}

// A program that writes one line and waits for its answer (`coproc ordo translate`) gets
// it: a batch closes when the input pauses, so a line is answered without waiting for
// the next. Before, ordo waited for 32 lines (--batch-size) or the end of input, and
// both sides hung. Batched generate (--json) reads the same way.
TEST(TranslateCli, EachLineThroughAPipeIsAnsweredWithoutWaitingForTheNext) {
  const std::string llama = (weights_dir() / "german-llama").string();
  struct Case {
    std::vector<std::string> arguments;
    std::string line, answer_start;
  };
  for (const Case& c : {Case{{"translate"}, "cats chase dogs\n", "Katzen jagen Hunde\n"},
                        Case{{"translate", "--json"}, "dogs chase cats\n", "{"},
                        Case{{"generate", "--model", llama, "--json", "--max-length", "3"}, "Die Katze\n", "{"}}) {
    SCOPED_TRACE(c.arguments.front() + " " + c.arguments.back());
    Running ordo(c.arguments);
    for (int round = 0; round < 2; ++round) {
      ordo.write(c.line);  // and stdin stays open
      const std::string answer = ordo.read_some(c.answer_start.size(), 20);
      EXPECT_EQ(answer, c.answer_start) << "round " << round;
      if (answer != c.answer_start) break;
      const std::string rest = answer.back() == '\n' ? "" : ordo.read_some(4096, 0.5);  // the rest of the line
      EXPECT_TRUE(answer.back() == '\n' || rest.ends_with("\n")) << rest;
    }
    EXPECT_TRUE(ordo.running());
    ordo.close_input();
    EXPECT_EQ(ordo.wait(), 0);
  }
}

// Line i samples from stream i (its line number): the output depends on the seed and
// the line, not on how lines are batched. The oracle for "it is really sampling" is
// another seed, whose output differs.
TEST(TranslateCli, SamplingIsReproducibleAndIndependentOfBatching) {
  const TestRows rows = test_rows(40);
  const std::string input = joined(rows.sources);
  // A high temperature, so that the draws leave the greedy path on many lines.
  const std::string sample = "translate --sample --temperature 1.5 ";
  const auto first = run_ordo(sample + "--seed 5", input);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(line_count(first.out), rows.sources.size());
  const auto again = run_ordo(sample + "--seed 5", input);
  EXPECT_EQ(again.out, first.out);
  for (const char* size : {"1", "32"}) {
    SCOPED_TRACE(size);
    const auto r = run_ordo(sample + "--seed 5 --batch-size " + size, input);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, first.out);
  }
  const auto other = run_ordo(sample + "--seed 6", input);
  ASSERT_EQ(other.exit_code, 0) << other.err;
  const auto a = split_lines(first.out), b = split_lines(other.out);
  ASSERT_EQ(a.size(), b.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  EXPECT_GE(differ, 5u);

  // Arguments are lines too: the sentence given as the first argument draws from
  // stream 0, as the first line of stdin does.
  const auto argument = run_ordo(sample + "--seed 5 " + shell_quote(rows.sources[0]));
  ASSERT_EQ(argument.exit_code, 0) << argument.err;
  EXPECT_EQ(argument.out, a[0] + '\n');
}

// ---------------------------------------------------------------------------------
// 7. eval with beam search and odd batch sizes

TEST(TranslateCli, EvalWithBeamAndBatchSizeReportsTheSameExactMatch) {
  const TestRows rows = test_rows(20);
  const TempDir dir("translate_cli_eval");
  const fs::path data = dir / "small.tsv";
  std::ofstream(data) << joined(rows.rows);

  const auto greedy = run_ordo("eval --json --data " + quoted(data));
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  const auto beam = run_ordo("eval --json --beam 2 --batch-size 7 --data " + quoted(data));
  ASSERT_EQ(beam.exit_code, 0) << beam.err;
  const auto g = nlohmann::json::parse(greedy.out), b = nlohmann::json::parse(beam.out);
  EXPECT_EQ(b["sentences"], 20);
  EXPECT_EQ(b["failures"], 0);
  // The default model translates these held-out sentences (>= 98%: test_showcase), so
  // exact match is high, and a beam of 2 finds the same translations: equal to the
  // percent, as is BLEU (to float rounding: 1e-9).
  EXPECT_GE(g["exact_match"].get<double>(), 90.0);
  EXPECT_DOUBLE_EQ(b["exact_match"].get<double>(), g["exact_match"].get<double>());
  EXPECT_NEAR(b["bleu"].get<double>(), g["bleu"].get<double>(), 1e-9);

  // The text report says the same.
  const auto table = run_ordo("eval --beam 2 --batch-size 7 --data " + quoted(data));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  std::ostringstream expected;
  expected.setf(std::ios::fixed);
  expected.precision(2);
  expected << "exact match:    " << g["exact_match"].get<double>() << " %";
  EXPECT_NE(table.out.find(expected.str()), std::string::npos) << table.out;
}

}  // namespace
}  // namespace ordo
