// `ordo generate` and decoder-only `ordo score` as a user meets them: streaming,
// JSON, lengths, forced translation prefixes, and the errors that steer a user to the
// right command. The models are random decoder-only models with the shipped tokenizer
// (what they say is noise; what is under test is the plumbing) and the shipped
// encoder-decoder default.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/search.h"
#include "models/model.h"
#include "tests/cli_runner.h"
#include "tests/model_factory.h"

extern char** environ;

namespace ordo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing_support::run_ordo;
using testing_support::shell_quote;

fs::path weights_dir() { return fs::path(ORDO_SOURCE_DIR) / "weights"; }

// A random decoder-only model (RoPE, pre-norm, grouped-query 2:1) over the shipped
// tokenizer's 344 pieces, bos = eos = 1 as in GPT-2; learned positions when asked, to
// have a position limit.
fs::path random_lm(const std::string& positions = "rope") {
  static std::map<std::string, fs::path> made;
  auto& dir = made[positions];
  if (!dir.empty()) return dir;
  dir = testing_support::temp_dir("generate_cli");
  json config = testing_support::tiny_config();
  config.update({{"vocab_size", 344}, {"encoder_layers", 0}, {"decoder_attention_heads", 4}, {"num_key_value_heads", 2},
                 {"position_encoding", positions}, {"normalize_before", true}, {"bos_token_id", 1},
                 {"max_position_embeddings", 16}});
  testing_support::write_random_model(dir, config, 11);
  fs::copy_file(weights_dir() / "tokenizer.model", dir / "tokenizer.model");
  return dir;
}

std::string model_flag(const fs::path& dir) { return "--model " + shell_quote(dir.string()); }

// ordo running with pipes on stdin and stdout, so a test can talk to it line by line.
class Running {
 public:
  explicit Running(const std::vector<std::string>& arguments) {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    for (int fd : {in[0], in[1], out[0], out[1]}) posix_spawn_file_actions_addclose(&actions, fd);
    std::vector<char*> argv{const_cast<char*>(ORDO_CLI)};
    for (const std::string& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, ORDO_CLI, &actions, nullptr, argv.data(), environ) != 0)
      throw std::runtime_error("cannot start ordo");
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~Running() {
    if (to_ >= 0) ::close(to_);
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(from_);
  }

  void write(const std::string& text) { ASSERT_EQ(::write(to_, text.data(), text.size()), static_cast<ssize_t>(text.size())); }
  void close_input() {
    ::close(to_);
    to_ = -1;
  }
  // Reads until `count` bytes have arrived or `seconds` pass.
  std::string read_some(std::size_t count, double seconds) {
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (text.size() < count && std::chrono::steady_clock::now() < deadline) {
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buffer[256];
      const ssize_t n = ::read(from_, buffer, std::min(sizeof buffer, count - text.size()));
      if (n <= 0) break;
      text.append(buffer, static_cast<std::size_t>(n));
    }
    return text;
  }
  bool running() {
    if (exited_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    return !exited_;
  }
  int wait() {
    if (!exited_) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
      exited_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    return exit_code_;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
};

// The prompt's text comes out as soon as ordo starts on it, and each token's text
// after it, before the process is done: here ordo reads its second prompt only after
// the first is answered, so everything the first prints arrives while it still runs.
TEST(GenerateCli, StreamsTokensBeforeTheProcessEnds) {
  const auto dir = random_lm();
  const std::string expected = run_ordo("generate " + model_flag(dir) + " --max-length 6 'Die Katze'").out;
  ASSERT_GT(expected.size(), std::string("Die Katze\n").size()) << expected;

  Running ordo({"generate", "--model", dir.string(), "--max-length", "6"});
  ordo.write("Die Katze\n");
  const std::string first_token = ordo.read_some(std::string("Die Katze").size() + 1, 60);
  EXPECT_EQ(first_token, expected.substr(0, first_token.size()));
  EXPECT_GT(first_token.size(), std::string("Die Katze").size()) << "no token text yet";
  EXPECT_TRUE(ordo.running()) << "ordo ended before the test read its first token";
  const std::string rest = ordo.read_some(expected.size() - first_token.size(), 60);
  EXPECT_EQ(first_token + rest, expected);
  EXPECT_TRUE(ordo.running());  // waiting for the next prompt
  ordo.close_input();
  EXPECT_EQ(ordo.wait(), 0);
}

// JSON: prompt_ids (bos first), generated_ids, text, and score = the sum of the
// generated tokens' log-probabilities, which the model's own teacher-forced scoring of
// prompt + continuation confirms (1e-4: float32 summation order differs).
TEST(GenerateCli, JsonScoreIsTheGeneratedTokensLogProbability) {
  const auto dir = random_lm();
  const auto r = run_ordo("generate " + model_flag(dir) + " --json --max-length 5 'Die Katze'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const auto prompt = j.at("prompt_ids").get<std::vector<int>>();
  const auto generated = j.at("generated_ids").get<std::vector<int>>();
  EXPECT_EQ(prompt.front(), 1);  // bos
  EXPECT_EQ(j.at("prompt"), "Die Katze");
  EXPECT_LE(generated.size(), 5u);
  EXPECT_TRUE(j.at("text").is_string());
  EXPECT_EQ(j.at("finished"), !generated.empty() && generated.back() == 1);

  const auto model = Model::load(dir);
  std::vector<int> sequence = prompt;
  sequence.insert(sequence.end(), generated.begin(), generated.end());
  const std::vector<float> logprobs = score_target(model->transformer(), {}, sequence);
  const double continuation = std::accumulate(logprobs.end() - static_cast<std::ptrdiff_t>(generated.size()),
                                              logprobs.end(), 0.0);
  EXPECT_NEAR(j.at("score").get<double>(), continuation, 1e-4);

  // --no-bos: the prompt as the tokenizer gives it.
  const json plain = json::parse(run_ordo("generate " + model_flag(dir) + " --json --no-bos --max-length 2 'Die Katze'").out);
  EXPECT_EQ(plain.at("prompt_ids").get<std::vector<int>>(), std::vector<int>(prompt.begin() + 1, prompt.end()));
}

TEST(GenerateCli, MaxLengthCountsGeneratedTokensAndRespectsPositions) {
  const auto dir = random_lm("learned");  // 16 positions
  for (const int n : {1, 3, 7}) {
    const json j = json::parse(
        run_ordo("generate " + model_flag(dir) + " --json --max-length " + std::to_string(n) + " --prompt-ids '1 20 30'").out);
    const auto generated = j.at("generated_ids").get<std::vector<int>>();
    EXPECT_LE(generated.size(), static_cast<std::size_t>(n));
    if (j.at("finished") == false) {
      EXPECT_EQ(generated.size(), static_cast<std::size_t>(n));
    }
  }
  // 3 prompt tokens leave room for 14 generated ones (the last is never fed back).
  const auto r = run_ordo("generate " + model_flag(dir) + " --max-length 15 --prompt-ids '1 20 30'");
  EXPECT_EQ(r.exit_code, 1) << r.err;  // a property of this prompt, not of the flag alone
  EXPECT_NE(r.err.find("max_length: 15 is beyond the decoder's learned positions (max_position_embeddings=16) after a "
                       "prompt of 3 tokens; use at most 14"),
            std::string::npos)
      << r.err;
  // Without --max-length generation stops where the positions end.
  const json j = json::parse(run_ordo("generate " + model_flag(dir) + " --json --prompt-ids '1 20 30'").out);
  EXPECT_LE(j.at("generated_ids").size(), 14u);
}

TEST(GenerateCli, StdinPromptsGiveOneLineEachInOrder) {
  const auto dir = random_lm();
  const std::string one = run_ordo("generate " + model_flag(dir) + " --max-length 3 'Die Katze'").out;
  const std::string two = run_ordo("generate " + model_flag(dir) + " --max-length 3 'Der Hund'").out;
  for (const char* flags : {"", " --beam 2", " --batch-size 1 --beam 2"}) {
    SCOPED_TRACE(flags);
    const auto r = run_ordo("generate " + model_flag(dir) + " --max-length 3" + flags, "Die Katze\nDer Hund\n");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (std::string(flags).empty()) {
      EXPECT_EQ(r.out, one + two);
    }
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2);
  }
}

TEST(GenerateCli, EncoderDecoderModelsContinueAForcedTranslationPrefix) {
  auto r = run_ordo("generate --source 'cats chase dogs' Katzen");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Katzen jagen Hunde\n");
  // The prefix is forced even where the model would not choose it.
  r = run_ordo("generate --json --source 'cats chase dogs' Hunde");
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("prompt"), "Hunde");
  EXPECT_EQ(j.at("source"), "cats chase dogs");
  EXPECT_FALSE(j.at("prompt_ids").empty());
  EXPECT_NE(j.at("prompt_ids").front(), 1);  // no bos for a target prefix
  // --source alone is its translation.
  EXPECT_EQ(run_ordo("generate --source 'dogs chase cats'").out, "Hunde jagen Katzen\n");
}

TEST(GenerateCli, ErrorsSteerToTheRightCommand) {
  const auto dir = random_lm();
  auto r = run_ordo("generate " + model_flag(dir) + " --source 'cats' 'Die'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("this model is decoder-only: it reads no --source"), std::string::npos) << r.err;
  r = run_ordo("generate --model sinusoidal Katzen");  // without --model: german-llama, which continues it
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("give --source TEXT"), std::string::npos) << r.err;
  r = run_ordo("translate " + model_flag(dir) + " 'cats'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is a decoder-only model: it continues text rather than translating it (use ordo generate"),
            std::string::npos)
      << r.err;
  r = run_ordo("generate " + model_flag(dir) + " --beam 0 Die");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--beam"), std::string::npos) << r.err;
  r = run_ordo("generate " + model_flag(dir) + " --prompt-ids '1 400'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("prompt: id 400 at position 1 is outside the vocabulary [0, 344)"), std::string::npos) << r.err;
}

// A decoder-only model scores a text on its own: each token after the first given the
// ones before, the same numbers as the library's score_target.
TEST(GenerateCli, ScoreWithoutASourceOnADecoderOnlyModel) {
  const auto dir = random_lm();
  const auto r = run_ordo("score " + model_flag(dir) + " --json --target-ids '1 20 30 40 1'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const auto model = Model::load(dir);
  const std::vector<float> want = score_target(model->transformer(), {}, std::vector<int>{1, 20, 30, 40, 1});
  const auto got = j.at("token_logprobs").get<std::vector<double>>();
  ASSERT_EQ(got.size(), 4u);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6);
  EXPECT_EQ(j.at("target_ids").get<std::vector<int>>(), (std::vector<int>{20, 30, 40, 1}));
  // Text: bos, the pieces, eos.
  const json text = json::parse(run_ordo("score " + model_flag(dir) + " --json --target 'Die Katze'").out);
  EXPECT_EQ(text.at("target_ids").back(), 1);
  EXPECT_EQ(run_ordo("score " + model_flag(dir) + " --source x --target y").exit_code, 1);
  EXPECT_EQ(run_ordo("score --target 'Katzen'").exit_code, 1);  // the default model needs a source
}

TEST(GenerateCli, InspectShowsTheFamilyAndTheGroupedQueryRatio) {
  const auto dir = random_lm();
  json j = json::parse(run_ordo("inspect --json " + model_flag(dir)).out);
  EXPECT_EQ(j.at("architecture").at("family"), "ordo");
  EXPECT_EQ(j.at("architecture").at("kind"), "decoder-only");
  EXPECT_EQ(j.at("architecture").at("grouped_query_ratio"), 2);
  const auto text = run_ordo("inspect " + model_flag(dir)).out;
  EXPECT_NE(text.find("family: ordo (decoder-only)"), std::string::npos) << text;
  EXPECT_NE(text.find("4 query heads over 2 K/V heads (ratio 2:1)"), std::string::npos) << text;
  j = json::parse(run_ordo("inspect --json").out);
  EXPECT_EQ(j.at("architecture").at("kind"), "encoder-decoder");
}

}  // namespace
}  // namespace ordo
