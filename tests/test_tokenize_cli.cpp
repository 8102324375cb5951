// ordo tokenize and ordo detokenize (tools/cli/command_tokenize.cpp, command_detokenize.cpp):
// the ids shown are the ones translate, generate and score feed the model; ids back to
// text as those commands print it; a bad id is an error naming it.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "engine/printable.h"

namespace ordo {
namespace {

using testing_support::CommandResult;
using testing_support::run_ordo;

TEST(TokenizeCli, ASourceIsShownAsTheEncoderReadsItWithEos) {
  const CommandResult r = run_ordo("tokenize --json 'cats chase dogs'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // The same ids translate reports as source_ids.
  const CommandResult t = run_ordo("translate --json 'cats chase dogs'");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_EQ(j["ids"], nlohmann::json::parse(t.out)["source_ids"]);
  EXPECT_EQ(j["ids"], nlohmann::json::array({133, 85, 123, 1}));
  EXPECT_EQ(j["pieces"], nlohmann::json::array({"▁cats", "▁chase", "▁dogs", "</s>"}));
  EXPECT_EQ(j["as"], "source");

  const CommandResult text = run_ordo("tokenize 'cats chase dogs'");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out,
            "a source, as the encoder reads it (eos appended), 4 tokens\n"
            "pieces: ▁cats ▁chase ▁dogs </s>\n"
            "ids:    133   85     123   1\n");
}

TEST(TokenizeCli, APromptOfADecoderOnlyModelStartsWithBos) {
  const CommandResult r = run_ordo("tokenize --json --model german-llama 'Die Katze'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["as"], "prompt");
  EXPECT_EQ(j["ids"], nlohmann::json::array({1, 11, 9, 50}));  // the README's --prompt-ids
  const CommandResult no_bos = run_ordo("tokenize --json --no-bos --model german-llama 'Die Katze'");
  EXPECT_EQ(nlohmann::json::parse(no_bos.out)["ids"], nlohmann::json::array({11, 9, 50}));
  const CommandResult source = run_ordo("tokenize --as source --model german-llama 'Die Katze'");
  EXPECT_EQ(source.exit_code, 2);
  EXPECT_NE(source.err.find("decoder-only"), std::string::npos) << source.err;
}

TEST(TokenizeCli, ATargetIsWhatScoreReads) {
  const CommandResult r = run_ordo("tokenize --json --as target 'Katzen jagen Hunde'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["ids"], nlohmann::json::array({122, 84, 12, 111, 1}));
}

TEST(TokenizeCli, AnEncoderDecoderPromptIsWhatGenerateForces) {
  const CommandResult r = run_ordo("tokenize --json --as prompt 'Katzen jagen'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CommandResult g = run_ordo("generate --json --source 'cats chase dogs' 'Katzen jagen'");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["ids"], nlohmann::json::parse(g.out)["prompt_ids"]);
}

TEST(TokenizeCli, ControlCharactersInPiecesAreEscapedAsEveryTextFromAFile) {
  EXPECT_EQ(printable("a\nb\tc\rd\x01\x7f\\▁e"), "a\\nb\\tc\\rd\\x01\\x7f\\\\▁e");
  EXPECT_EQ(printable("▁Katzen"), "▁Katzen");
}

TEST(DetokenizeCli, IdsBecomeTheTextTranslatePrints) {
  const CommandResult r = run_ordo("detokenize '122 84 12 111 1'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Katzen jagen Hunde\n");
  const CommandResult source = run_ordo("detokenize --as source 133 85 123 1");
  EXPECT_EQ(source.out, "cats chase dogs\n");
  const CommandResult llama = run_ordo("detokenize --model german-llama --json '1 11 9 50'");
  ASSERT_EQ(llama.exit_code, 0) << llama.err;
  EXPECT_EQ(nlohmann::json::parse(llama.out)["text"], "Die Katze");
}

TEST(DetokenizeCli, AnIdOutsideTheVocabularyIsNamedEvenAfterEos) {
  const CommandResult r = run_ordo("detokenize '122 1 99999'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("id 99999 at position 2 is outside the vocabulary"), std::string::npos) << r.err;
  const CommandResult word = run_ordo("detokenize '12 x'");
  EXPECT_EQ(word.exit_code, 1);
  EXPECT_NE(word.err.find("'x' is not a token id"), std::string::npos) << word.err;
}

}  // namespace
}  // namespace ordo
