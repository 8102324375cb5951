// The public API (<ordo/ordo.hpp>) as a program sees it: this file includes nothing
// else of ordo. Oracles: the shipped models' known outputs ("cats chase dogs" ->
// "Katzen jagen Hunde", test_showcase.cpp), sums and shapes that follow from the
// definitions, and the public headers' own text (they include only <ordo/...> and the
// standard library).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <regex>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

namespace {

namespace fs = std::filesystem;

const fs::path kWeights = fs::path(ORDO_SOURCE_DIR) / "weights";

const ordo::Model& translation_model() {
  static const ordo::Model model = ordo::Model::load(kWeights / "sinusoidal");
  return model;
}

const ordo::Model& language_model() {
  static const ordo::Model model = ordo::Model::load(kWeights / "german-llama");
  return model;
}

TEST(Api, TranslatesTheShowcaseSentence) {
  ordo::Translator translator(translation_model());
  EXPECT_EQ(translator.translate("cats chase dogs"), "Katzen jagen Hunde");
  EXPECT_FALSE(translation_model().is_decoder_only());
  EXPECT_EQ(translation_model().model_type(), "ordo");
  EXPECT_TRUE(translation_model().has_tokenizer());
}

TEST(Api, LoadDefaultFindsTheShippedModelFromTheBuildTree) {
  const char* before = std::getenv("ORDO_MODEL");
  const std::string saved = before ? before : "";
  ::unsetenv("ORDO_MODEL");
  const ordo::Model model = ordo::Model::load_default();
  if (before) ::setenv("ORDO_MODEL", saved.c_str(), 1);
  EXPECT_EQ(fs::canonical(model.directory()), fs::canonical(kWeights / "sinusoidal"));
  EXPECT_EQ(ordo::Translator(model).translate("dogs chase cats"), "Hunde jagen Katzen");
}

TEST(Api, OptionsReachTheSearchAndBadOnesNameTheirField) {
  ordo::TranslatorOptions options;
  options.decoding.beam_size = 4;
  options.decoding.n_best = 3;
  const ordo::Translation t = ordo::Translator(translation_model(), options).translate_detailed("cats chase dogs");
  ASSERT_TRUE(t.ok()) << t.error;
  ASSERT_EQ(t.hypotheses.size(), 3u);
  EXPECT_EQ(t.best().text, "Katzen jagen Hunde");
  EXPECT_EQ(t.source_ids, (std::vector<int>{133, 85, 123, 1}));
  for (std::size_t i = 1; i < t.hypotheses.size(); ++i)
    EXPECT_GE(t.hypotheses[i - 1].normalized_score, t.hypotheses[i].normalized_score) << i;
  const ordo::Hypothesis& best = t.best();
  EXPECT_NEAR(best.score, std::accumulate(best.token_logprobs.begin(), best.token_logprobs.end(), 0.0), 1e-5);
  EXPECT_TRUE(best.finished);

  options.decoding.beam_size = 0;
  try {
    ordo::Translator bad(translation_model(), options);
    FAIL() << "beam_size 0 was accepted";
  } catch (const ordo::OptionError& e) {
    EXPECT_EQ(e.field(), "beam_size");
  }
}

TEST(Api, ABatchKeepsOrderAndFailsOnlyTheBadLine) {
  ordo::Translator translator(translation_model());
  const std::vector<std::string> lines{"cats chase dogs", "bad \x01 control", "dogs chase cats"};
  const std::vector<ordo::Translation> batch = translator.translate_batch(lines);
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch[0].best().text, "Katzen jagen Hunde");
  EXPECT_FALSE(batch[1].ok());
  EXPECT_THROW(batch[1].best(), ordo::Error);
  EXPECT_EQ(batch[2].best().text, "Hunde jagen Katzen");
  EXPECT_THROW(translator.translate("bad \x01 control"), ordo::Error);
  const std::vector<std::vector<int>> ids{{133, 85, 123, 1}};
  EXPECT_EQ(translator.translate_ids_batch(ids).front().best().ids, (std::vector<int>{122, 84, 12, 111, 1}));
}

TEST(Api, ErrorsAreOrdoErrorsThatSayWhatToDo) {
  try {
    (void)ordo::Model::load("/nonexistent/model");
    FAIL() << "loaded a missing directory";
  } catch (const ordo::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ordo::Translator{language_model()}, ordo::Error);  // decoder-only: a Generator's
}

TEST(Api, ScoreIsTheSumOfTokenLogprobsOfTheTargetWithEos) {
  ordo::Translator translator(translation_model());
  const ordo::Score s = translator.score("cats chase dogs", "Katzen jagen Hunde");
  EXPECT_EQ(s.ids, (std::vector<int>{122, 84, 12, 111, 1}));
  ASSERT_EQ(s.token_logprobs.size(), s.ids.size());
  EXPECT_NEAR(s.logprob, std::accumulate(s.token_logprobs.begin(), s.token_logprobs.end(), 0.0), 1e-5);
  // Greedy search found this target, token by token: the same log-probabilities.
  EXPECT_NEAR(s.logprob, translator.translate_detailed("cats chase dogs").best().score, 1e-4);
  EXPECT_LT(translator.score("cats chase dogs", "Hunde jagen Katzen").logprob, s.logprob);
}

TEST(Api, EncoderOutputHasARowPerSourceToken) {
  const ordo::EncoderOutput out = ordo::Translator(translation_model()).encode("cats chase dogs");
  EXPECT_EQ(out.ids, (std::vector<int>{133, 85, 123, 1}));
  ASSERT_EQ(out.tokens.size(), 4u);
  EXPECT_EQ(out.tokens[0], "\xE2\x96\x81" "cats");
  EXPECT_EQ(out.rows, 4);
  EXPECT_EQ(out.cols, 128);  // d_model of the shipped models
  ASSERT_EQ(out.values.size(), 4u * 128u);
  EXPECT_EQ(out.at(3, 127), out.values.back());
  EXPECT_THROW((void)out.at(4, 0), ordo::Error);
  // Positions make the same words in another order encode differently.
  const ordo::EncoderOutput swapped = ordo::Translator(translation_model()).encode("dogs chase cats");
  EXPECT_NE(out.values, swapped.values);
}

// Every row of every matrix is a distribution; the causal one is zero above the diagonal.
void expect_rows_are_distributions(const ordo::AttentionMatrix& m) {
  for (int i = 0; i < m.rows; ++i) {
    double sum = 0;
    for (int j = 0; j < m.cols; ++j) {
      sum += m.at(i, j);
      if (m.kind == ordo::AttentionKind::Decoder && j > i) {
        EXPECT_EQ(m.at(i, j), 0.0f) << i << "," << j;
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "layer " << m.layer << " head " << m.head << " row " << i;
  }
}

TEST(Api, AttentionOfATranslationCoversEveryKindLayerAndHead) {
  const ordo::Attention a = ordo::Translator(translation_model()).attention("cats chase dogs");
  EXPECT_EQ(a.source_tokens.size(), 4u);  // three words and eos
  // decoder_start, then the translation's four tokens (its eos is predicted, not read)
  ASSERT_EQ(a.target_tokens.size(), 5u);
  EXPECT_EQ(a.target_tokens[1], "\xE2\x96\x81" "Katzen");
  EXPECT_EQ(a.matrices.size(), 3u * 2u * 4u);  // kinds x layers x heads of the shipped models
  for (const ordo::AttentionMatrix& m : a.matrices) expect_rows_are_distributions(m);
  const ordo::AttentionMatrix& cross = a.get(ordo::AttentionKind::Cross, 1, 3);
  EXPECT_EQ(cross.rows, 5);
  EXPECT_EQ(cross.cols, 4);
  EXPECT_EQ(a.get(ordo::AttentionKind::Encoder, 0, 0).rows, 4);
  EXPECT_THROW((void)a.get(ordo::AttentionKind::Cross, 2, 0), ordo::Error);
  // An explicit target is read as given.
  const ordo::Attention forced = ordo::Translator(translation_model()).attention("cats chase dogs", "Hunde");
  EXPECT_EQ(forced.get(ordo::AttentionKind::Decoder, 0, 0).rows, 2);
}

TEST(Api, GeneratorContinuesScoresAndShowsSelfAttention) {
  ordo::GeneratorOptions options;
  options.decoding.max_length = 8;
  ordo::Generator generator(language_model(), options);
  EXPECT_TRUE(language_model().is_decoder_only());
  std::string streamed;
  const std::string text = generator.generate("Die Katze", [&](std::string_view piece) { streamed += piece; });
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(generator.generate_detailed("Die Katze").best().text, text);
  const std::vector<std::string> prompts{"Die Katze", "Der Hund"};
  const auto batch = generator.generate_batch(prompts);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].best().text, text);
  EXPECT_EQ(batch[0].prompt_ids, (std::vector<int>{1, 11, 9, 50}));  // bos, "Die Katze"

  const ordo::Score s = generator.score("Die Katze jagt den Hund.");
  EXPECT_NEAR(s.logprob, std::accumulate(s.token_logprobs.begin(), s.token_logprobs.end(), 0.0), 1e-5);

  const ordo::Attention a = generator.attention("Die Katze");
  EXPECT_TRUE(a.source_tokens.empty());
  EXPECT_EQ(a.target_tokens.size(), 4u);  // bos and three pieces
  ASSERT_FALSE(a.matrices.empty());
  for (const ordo::AttentionMatrix& m : a.matrices) {
    EXPECT_EQ(m.kind, ordo::AttentionKind::Decoder);
    expect_rows_are_distributions(m);
  }
  EXPECT_THROW((void)a.get(ordo::AttentionKind::Cross, 0, 0), ordo::Error);
}

// The installed headers show nothing of the engine: each includes only another public
// header or a standard one (no "engine/", no <cblas.h>, <sentencepiece_processor.h>,
// <nlohmann/json.hpp>).
TEST(Api, PublicHeadersIncludeOnlyOrdoAndTheStandardLibrary) {
  // Both folders the installed include/ordo/ is made of (tools/package).
  const fs::path root(ORDO_SOURCE_DIR);
  const std::regex include(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  int headers = 0;
  for (const fs::path& dir : {root / "engine" / "include" / "ordo", root / "models" / "api" / "ordo"})
    for (const auto& entry : fs::directory_iterator(dir)) {
      ++headers;
      std::ifstream in(entry.path());
      std::string line;
      while (std::getline(in, line)) {
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const std::string name = m[2];
        const bool ordo = name.rfind("ordo/", 0) == 0;
        const bool standard = m[1] == "<" && name.find('.') == std::string::npos && name.find('/') == std::string::npos;
        EXPECT_TRUE(ordo || standard) << entry.path().filename() << " includes " << name;
      }
    }
  EXPECT_GE(headers, 8);
}

// The CLI and its pictures are written against the public API, as a program embedding
// ordo is (STYLE.md 15): no file of tools/cli/ or tools/viz/ includes anything of
// engine/ or models/ but the public headers (<ordo/...>).
TEST(Api, TheCommandLineUsesOnlyThePublicApi) {
  const fs::path root(ORDO_SOURCE_DIR);
  const std::regex include(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  int files = 0;
  for (const fs::path& dir : {root / "tools" / "cli", root / "tools" / "viz"})
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      const std::string extension = entry.path().extension().string();
      if (extension != ".cpp" && extension != ".h") continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      while (std::getline(in, line)) {
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const std::string name = m[1];
        EXPECT_FALSE(name.starts_with("engine/") || name.starts_with("models/"))
            << fs::relative(entry.path(), root) << " includes " << name << ": add what it needs to the public API";
      }
    }
  EXPECT_GE(files, 40);
}

}  // namespace
