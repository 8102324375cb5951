// `ordo generate` and decoder-only `ordo score` as a user meets them: streaming,
// JSON, lengths, forced translation prefixes, and the errors that steer a user to the
// right command. The models are random decoder-only models with the shipped tokenizer
// (what they say is noise; what is under test is the plumbing) and the shipped
// encoder-decoder default.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/score.h"
#include "engine/search.h"
#include "models/loaded_model.h"
#include "tests/cli_runner.h"
#include "tests/model_factory.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing_support::run_ordo;
using testing_support::Running;
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

// A random decoder-only model (encoder-decoder with `encoder_layers` > 0) over
// tests/data/byte_fallback.model, whose byte pieces spell any byte: what it generates
// holds newlines, NUL and ESC, as a LLaMA model's output may.
fs::path byte_fallback_model(int encoder_layers) {
  static std::map<int, fs::path> made;
  auto& dir = made[encoder_layers];
  if (!dir.empty()) return dir;
  dir = testing_support::temp_dir("byte_fallback");
  json config = testing_support::tiny_config();
  config.update({{"vocab_size", 300}, {"encoder_layers", encoder_layers}, {"normalize_before", true},
                 {"bos_token_id", 1}, {"max_position_embeddings", 64}});
  testing_support::write_random_model(dir, config, 5);
  fs::copy_file(fs::path(ORDO_TEST_DATA_DIR) / "byte_fallback.model", dir / "tokenizer.model");
  return dir;
}

// README's escaping of plain text output, spelled out as the oracle: a backslash, line
// feed and carriage return as \\, \n, \r; every other control character the input rule
// refuses (U+0000-U+001F but tab, U+007F-U+009F) as \u00XX.
std::string escaped(const std::string& text) {
  std::string out;
  char hex[8];
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if ((c < 0x20 && c != '\t') || c == 0x7F) {
      std::snprintf(hex, sizeof hex, "\\u%04x", c);
      out += hex;
    } else if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {  // U+0080-U+009F
      std::snprintf(hex, sizeof hex, "\\u%04x", next);
      out += hex;
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool has_control_character(const std::string& text) {
  return std::any_of(text.begin(), text.end(),
                     [](char c) { return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7F; });
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

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

  const auto model = LoadedModel::load(dir);
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

// A checkpoint's max_length is a ceiling, not a request: Marian's generation_config.json
// gives 512, its whole position table, and a prompt then leaves less room. Before, every
// generate --source with a prompt on it failed ("max_length: 511 is beyond ...") although
// no one had asked for 511; a --max-length given on the command line is still held to it.
TEST(GenerateCli, ACheckpointsMaxLengthGivesWayToAPrompt) {
  const std::string marian = " --model " + shell_quote((weights_dir() / "marian").string());
  auto r = run_ordo("generate" + marian + " --source 'the dog sees a cat' Der");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Der ", 0), 0u) << r.out;
  r = run_ordo("generate" + marian + " --max-length 511 --source 'the dog sees a cat' Der");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("max_length: 511 is beyond"), std::string::npos) << r.err;
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
  const auto model = LoadedModel::load(dir);
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

// Sentence i draws from (seed, i) in every mode, as README's --seed says: three equal
// prompts on three lines get three continuations, and the streamed plain text is, line
// by line, what --json gives (which decodes in batches). Before, each streamed line drew
// from (seed, 0): three identical lines.
TEST(GenerateCli, SampledLinesDrawFromTheirLineNumberInEveryMode) {
  const auto dir = random_lm();
  const std::string input = "Die Katze\nDie Katze\nDie Katze\n";
  const std::string flags = " --sample --seed 3 --max-length 8";
  const auto plain = run_ordo("generate " + model_flag(dir) + flags, input);
  const auto in_json = run_ordo("generate " + model_flag(dir) + flags + " --json", input);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(in_json.exit_code, 0) << in_json.err;
  const auto lines = lines_of(plain.out);
  const auto objects = lines_of(in_json.out);
  ASSERT_EQ(lines.size(), 3u) << plain.out;
  ASSERT_EQ(objects.size(), 3u) << in_json.out;
  EXPECT_FALSE(lines[0] == lines[1] && lines[1] == lines[2]) << plain.out;
  for (std::size_t i = 0; i < 3; ++i) {
    const json j = json::parse(objects[i]);
    EXPECT_EQ(lines[i], j.at("prompt").get<std::string>() + j.at("text").get<std::string>()) << "line " << i + 1;
  }
  // PROMPT arguments: prompt i draws from (seed, i) too.
  const auto arguments = run_ordo("generate " + model_flag(dir) + flags + " 'Die Katze' 'Die Katze' 'Die Katze'");
  EXPECT_EQ(arguments.out, plain.out);
}

// A tokenizer with byte pieces lets a model generate a newline, CR, NUL or ESC. Plain
// output escapes them (README, "Untrusted input"), so one prompt or sentence still gives
// one line, streamed or not. Oracle: the --json text (JSON escapes on its own), escaped
// as README says. Before, three prompts gave more than three lines, and a streamed line
// stopped growing at the first byte piece that begins a character (its text decodes as
// U+FFFD until the rest arrives).
TEST(GenerateCli, GeneratedControlCharactersAreEscapedOneLinePerInput) {
  const std::string prompts = "die katze\nder hund\ndie maus\n";
  const std::string sampled = " --sample --seed 5 --max-length 40";
  struct Case {
    std::string command;  // "generate" or "translate"
    std::string flags;
    int encoder_layers;
  };
  for (const Case& c : {Case{"generate", sampled, 0}, Case{"generate", " --beam 2 --max-length 40", 0},
                        Case{"translate", sampled, 2}}) {
    SCOPED_TRACE(c.command + c.flags);
    const std::string run = c.command + " " + model_flag(byte_fallback_model(c.encoder_layers)) + c.flags;
    const auto in_json = run_ordo(run + " --json", prompts);
    ASSERT_EQ(in_json.exit_code, 0) << in_json.err;
    const auto objects = lines_of(in_json.out);
    ASSERT_EQ(objects.size(), 3u) << in_json.out;
    std::string expected;
    bool controls = false;
    for (const std::string& object : objects) {
      const json j = json::parse(object);
      const std::string text = c.command == "translate"
                                   ? j.at("translation").get<std::string>()
                                   : j.at("prompt").get<std::string>() + j.at("text").get<std::string>();
      controls = controls || has_control_character(text);
      expected += escaped(text) + "\n";
    }
    ASSERT_TRUE(controls) << "the test needs a generated control character; try another seed:\n" << in_json.out;
    const auto plain = run_ordo(run, prompts);
    EXPECT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_EQ(plain.out, expected);
  }
}

}  // namespace
}  // namespace ordo
