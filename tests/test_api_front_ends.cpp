// What the public API gained for front ends other than the CLI (the Python bindings,
// tools/python/): options per call (with_options), a call stopped from outside
// (InterruptCheck), each generated token as it comes (generate_streamed) and text pairs
// scored in a batch (score_batch).
// Oracles: the API's own plain calls (a Translator built with the same options, score()
// pair by pair, generate_detailed's best hypothesis), which the rest of the suite checks
// against the PyTorch oracle; exact equality, as the same code computes both.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ordo/ordo.hpp"

namespace {

const std::filesystem::path kWeights = std::filesystem::path(ORDO_SOURCE_DIR) / "weights";

const ordo::Model& translation_model() {
  static const ordo::Model model = ordo::Model::load(kWeights / "sinusoidal");
  return model;
}
const ordo::Model& language_model() {
  static const ordo::Model model = ordo::Model::load(kWeights / "german-llama");
  return model;
}

// What an interrupt check throws in these tests: not an ordo::Error, so that a catch of
// ordo::Error inside the call would let it through as it should.
struct Stop {};

const std::vector<std::string> kSentences = {"cats chase dogs", "the big dog sees a small cat.", "dogs chase cats",
                                             "the teacher likes the mouse"};

std::vector<std::string> best_texts(const std::vector<ordo::Translation>& translations) {
  std::vector<std::string> texts;
  for (const auto& t : translations) texts.push_back(t.ok() ? t.best().text : "error: " + t.error);
  return texts;
}

TEST(ApiFrontEnds, WithOptionsTranslatesAsANewTranslatorWithThoseOptions) {
  const ordo::Translator greedy(translation_model());
  ordo::TranslatorOptions beam;
  beam.decoding.beam_size = 4;
  beam.decoding.n_best = 2;
  beam.batch_size = 3;
  const ordo::Translator derived = greedy.with_options(beam);
  const ordo::Translator fresh(translation_model(), beam);
  const auto got = derived.translate_batch(kSentences);
  const auto want = fresh.translate_batch(kSentences);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].hypotheses.size(), 2u) << i;
    for (std::size_t h = 0; h < 2; ++h) {
      EXPECT_EQ(got[i].hypotheses[h].ids, want[i].hypotheses[h].ids) << i << "," << h;
      EXPECT_EQ(got[i].hypotheses[h].score, want[i].hypotheses[h].score) << i << "," << h;
    }
  }
  EXPECT_EQ(derived.options().decoding.beam_size, 4);
  EXPECT_EQ(greedy.options().decoding.beam_size, 1);  // the original keeps its own
  EXPECT_EQ(best_texts(greedy.translate_batch(kSentences)),
            best_texts(ordo::Translator(translation_model()).translate_batch(kSentences)));
}

TEST(ApiFrontEnds, WithOptionsChecksTheNewOptions) {
  const ordo::Translator translator(translation_model());
  ordo::TranslatorOptions bad;
  bad.decoding.n_best = 3;  // more than beam_size 1
  try {
    (void)translator.with_options(bad);
    FAIL() << "n_best 3 with beam_size 1 was accepted";
  } catch (const ordo::OptionError& e) {
    EXPECT_EQ(e.field(), "n_best") << e.what();
  }
  ordo::GeneratorOptions bad_generation;
  bad_generation.batch_size = 0;
  try {
    (void)ordo::Generator(language_model()).with_options(bad_generation);
    FAIL() << "batch_size 0 was accepted";
  } catch (const ordo::OptionError& e) {
    EXPECT_EQ(e.field(), "batch_size") << e.what();
  }
}

TEST(ApiFrontEnds, AnInterruptStopsATranslationAndTheTranslatorGoesOn) {
  const ordo::Translator plain(translation_model());
  const std::vector<std::string> want = best_texts(plain.translate_batch(kSentences));

  // Checks counted: one per text, one per batch, one per decoder step at least.
  int checks = 0;
  ordo::TranslatorOptions counting;
  counting.interrupt = [&] { ++checks; };
  EXPECT_EQ(best_texts(plain.with_options(counting).translate_batch(kSentences)), want);
  const int steps = static_cast<int>(plain.translate_detailed("the big dog sees a small cat.").best().ids.size());
  EXPECT_GE(checks, static_cast<int>(kSentences.size()) + 1 + steps);

  // Stopped in the middle of decoding (after the texts and the first batch's check).
  for (const int stop_at : {1, static_cast<int>(kSentences.size()) + 2, checks - 1}) {
    int seen = 0;
    ordo::TranslatorOptions stopping;
    stopping.interrupt = [&] {
      if (++seen == stop_at) throw Stop{};
    };
    EXPECT_THROW(plain.with_options(stopping).translate_batch(kSentences), Stop) << "stop at check " << stop_at;
    EXPECT_EQ(seen, stop_at);
    // The same buffers (with_options shares them) serve the next call as if nothing happened.
    EXPECT_EQ(best_texts(plain.translate_batch(kSentences)), want) << "after a stop at check " << stop_at;
  }
}

TEST(ApiFrontEnds, AnInterruptStopsGenerationAndScoring) {
  ordo::GeneratorOptions stopping;
  stopping.interrupt = [] { throw Stop{}; };
  const ordo::Generator generator(language_model(), stopping);
  EXPECT_THROW(generator.generate("Die Katze"), Stop);
  EXPECT_THROW(generator.generate_batch(std::vector<std::string>{"Die Katze", "Der Hund"}), Stop);
  EXPECT_THROW(generator.score_ids_batch(std::vector<std::vector<int>>{{1, 11, 9, 50}}), Stop);
  ordo::TranslatorOptions stop_translation;
  stop_translation.interrupt = [] { throw Stop{}; };
  const ordo::Translator translator(translation_model(), stop_translation);
  EXPECT_THROW(translator.score("cats chase dogs", "Katzen jagen Hunde"), Stop);
}

// The streamed tokens against the same generation's best hypothesis.
void expect_stream_is_the_best(const ordo::Generator& generator, const std::string& prompt, const std::string& source) {
  std::vector<ordo::GeneratedToken> tokens;
  const ordo::Generation result =
      generator.generate_streamed(generator.prepare(prompt, source), [&](const ordo::GeneratedToken& t) {
        tokens.push_back(t);
      });
  const ordo::Hypothesis& best = result.best();
  const ordo::Generation detailed = generator.generate_detailed(prompt, source);
  const ordo::Hypothesis& want = detailed.best();
  EXPECT_EQ(best.ids, want.ids);
  ASSERT_EQ(tokens.size(), best.ids.size()) << prompt;
  std::string joined;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    EXPECT_EQ(tokens[t].id, best.ids[t]) << "token " << t;
    EXPECT_EQ(tokens[t].logprob, best.token_logprobs[t]) << "token " << t;
    EXPECT_EQ(tokens[t].eos, best.finished && t + 1 == tokens.size()) << "token " << t;
    if (tokens[t].eos) {
      EXPECT_EQ(tokens[t].text, "");
    }
    joined += tokens[t].text;
  }
  EXPECT_EQ(joined, best.text) << prompt;
  EXPECT_FALSE(best.text.empty()) << prompt;
}

TEST(ApiFrontEnds, GenerateStreamedReportsEachTokenOfTheBestContinuation) {
  const ordo::Generator greedy(language_model());
  expect_stream_is_the_best(greedy, "Die Katze", "");
  ordo::GeneratorOptions cut;  // ends at max_length, not eos
  cut.decoding.max_length = 3;
  expect_stream_is_the_best(greedy.with_options(cut), "Der Hund", "");
  ordo::GeneratorOptions sampled;
  sampled.decoding.sample = true;
  sampled.decoding.seed = 3;
  expect_stream_is_the_best(greedy.with_options(sampled), "Der Hund", "");
  ordo::GeneratorOptions beams;  // every token at the end, the best's
  beams.decoding.beam_size = 4;
  expect_stream_is_the_best(greedy.with_options(beams), "Die Katze", "");
  // An encoder-decoder model continues a translation.
  expect_stream_is_the_best(ordo::Generator(translation_model()), "Katzen", "cats chase dogs");
}

TEST(ApiFrontEnds, GenerateStreamedReportsTokensAsTheyAreChosen) {
  // With one beam, a token is reported before the next decoder step: the interrupt
  // check that precedes each step sees one more token each time.
  std::size_t reported = 0;
  std::vector<std::size_t> seen_at_check;
  ordo::GeneratorOptions options;
  options.interrupt = [&] { seen_at_check.push_back(reported); };
  const ordo::Generator generator(language_model(), options);
  const ordo::Generation result =
      generator.generate_streamed(generator.prepare("Die Katze"), [&](const ordo::GeneratedToken&) { ++reported; });
  const std::size_t tokens = result.best().ids.size();
  ASSERT_EQ(reported, tokens);
  // The first check comes before the prompt's tokens are chosen; then one per step.
  std::vector<std::size_t> want;
  for (std::size_t t = 0; t < tokens; ++t) want.push_back(t);
  ASSERT_GE(seen_at_check.size(), want.size());
  EXPECT_EQ(std::vector<std::size_t>(seen_at_check.end() - static_cast<std::ptrdiff_t>(tokens), seen_at_check.end()),
            want);
}

TEST(ApiFrontEnds, ScoreBatchScoresEachPairAsScoreDoes) {
  const ordo::Translator translator(translation_model());
  const std::vector<std::string> sources = {"cats chase dogs", "", "the big dog sees a small cat.", "dogs chase cats"};
  const std::vector<std::string> targets = {"Katzen jagen Hunde", "Hunde", "der große Hund sieht eine kleine Katze.",
                                            ""};
  const std::vector<ordo::Score> scores = translator.score_batch(sources, targets);
  ASSERT_EQ(scores.size(), 4u);
  // Scored together, the two pairs are padded to the longer one, so the sums may differ
  // from one pair's in the last bits of float32. Tolerance: 1e-5 per token.
  for (const std::size_t i : {0u, 2u}) {
    const ordo::Score one = translator.score(sources[i], targets[i]);
    ASSERT_TRUE(scores[i].ok()) << scores[i].error;
    EXPECT_EQ(scores[i].ids, one.ids) << i;
    ASSERT_EQ(scores[i].token_logprobs.size(), one.token_logprobs.size()) << i;
    for (std::size_t t = 0; t < one.token_logprobs.size(); ++t)
      EXPECT_NEAR(scores[i].token_logprobs[t], one.token_logprobs[t], 1e-5) << "pair " << i << ", token " << t;
    EXPECT_NEAR(scores[i].logprob, one.logprob, 1e-5 * static_cast<double>(one.ids.size())) << i;
  }
  EXPECT_EQ(scores[1].error.rfind("source: ", 0), 0u) << scores[1].error;  // the side at fault
  EXPECT_EQ(scores[3].error.rfind("target: ", 0), 0u) << scores[3].error;
  EXPECT_THROW(translator.score_batch(sources, std::vector<std::string>{"x"}), ordo::Error);
}

}  // namespace
